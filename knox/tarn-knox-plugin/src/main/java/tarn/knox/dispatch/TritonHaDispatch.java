package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.knox.gateway.ha.dispatch.ConfigurableHADispatch;

import javax.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.net.URI;

/**
 * Knox's ConfigurableHADispatch (failover on connection errors, round robin with
 * enableLoadBalancing=true) to the HA provider's active TRITON instance (BackendUrls; asked again
 * on each failover), sending request bodies with the client's Content-Length (see RequestBodies).
 * A body over RequestBodies' replay limit is streamed once: a request whose body was already sent
 * when its instance failed is not replayed in full.
 */
public class TritonHaDispatch extends ConfigurableHADispatch {
  @Override
  public URI getDispatchUrl(HttpServletRequest request) {
    return BackendUrls.of(getHaProvider().getActiveURL(getServiceRole()), request);
  }

  @Override
  protected HttpEntity createRequestEntity(HttpServletRequest request) throws IOException {
    return RequestBodies.entity(request);
  }
}
