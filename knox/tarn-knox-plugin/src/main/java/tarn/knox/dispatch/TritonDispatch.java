package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.knox.gateway.dispatch.ConfigurableDispatch;

import javax.servlet.http.HttpServletRequest;
import java.io.IOException;

/** Knox's ConfigurableDispatch, sending request bodies with the client's Content-Length (see RequestBodies). */
public class TritonDispatch extends ConfigurableDispatch {
  @Override
  protected HttpEntity createRequestEntity(HttpServletRequest request) throws IOException {
    return RequestBodies.entity(request);
  }
}
