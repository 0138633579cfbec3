package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.knox.gateway.dispatch.ConfigurableDispatch;

import javax.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.net.URI;

/**
 * Knox's ConfigurableDispatch for a topology without HA for TRITON: to the topology's first
 * TRITON URL (BackendUrls), request bodies with the client's Content-Length (RequestBodies).
 */
public class TritonDispatch extends ConfigurableDispatch {
  @Override
  public URI getDispatchUrl(HttpServletRequest request) {
    return BackendUrls.of(BackendUrls.registered(request.getServletContext(), getServiceRole()), request);
  }

  @Override
  protected HttpEntity createRequestEntity(HttpServletRequest request) throws IOException {
    return RequestBodies.entity(request);
  }
}
