package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.knox.gateway.dispatch.ConfigurableDispatch;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;

/**
 * Knox's ConfigurableDispatch, sending request bodies with the client's Content-Length (see
 * RequestBodies) and answers as Triton sent them (ResponseBodies).
 */
public class TritonDispatch extends ConfigurableDispatch {
  @Override
  protected HttpEntity createRequestEntity(HttpServletRequest request) throws IOException {
    return RequestBodies.entity(request);
  }

  @Override
  protected void writeResponse(HttpServletRequest request, HttpServletResponse response, InputStream stream)
      throws IOException {
    ResponseBodies.write(response, stream);
  }
}
