package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.knox.gateway.ha.dispatch.ConfigurableHADispatch;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;

/**
 * Knox's ConfigurableHADispatch (failover on connection errors, round robin with
 * enableLoadBalancing=true), sending request bodies with the client's Content-Length (see
 * RequestBodies), answers as Triton sent them (ResponseBodies). A body is streamed once: a request
 * whose body was already sent when its instance failed is not replayed in full (as with Knox's own
 * dispatch).
 */
public class TritonHaDispatch extends ConfigurableHADispatch {
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
