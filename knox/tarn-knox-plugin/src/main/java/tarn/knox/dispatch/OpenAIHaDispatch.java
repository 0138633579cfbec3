package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.http.HttpResponse;
import org.apache.http.client.methods.HttpUriRequest;
import org.apache.knox.gateway.ha.dispatch.ConfigurableHADispatch;
import org.apache.knox.gateway.services.GatewayServices;
import tarn.knox.UserProof;
import tarn.knox.Users;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.util.HashSet;
import java.util.Set;

/**
 * Knox's HA dispatch for the role TRITON-OPENAI: OpenAI's API to the fronts beside the Triton
 * instances (TritonURLManager lists them from the znodes' openai_port). Unlike TRITON's:
 * <ul>
 *   <li>each request goes to the front with the fewest requests in flight through this gateway
 *       (LeastLoaded), counted here from the request to the end of its answer;</li>
 *   <li>{@code X-TARN-User} is the authenticated user, whatever the client sent, with its
 *       {@code X-TARN-User-Proof} (UserProof, from the token TarnAuthz holds);</li>
 *   <li>the answer is relayed as it comes, an event stream flushed piece by piece (FrontAnswers);</li>
 *   <li>failover only when the request did not reach a front: an answer that broke off, or a
 *       client that left, is not sent to another front (a generation would run twice).</li>
 * </ul>
 * Request bodies as TRITON's (RequestBodies: the bytes TarnAuthz read for the model, replayable).
 */
public class OpenAIHaDispatch extends ConfigurableHADispatch {
  static final String TRIED = "tarn.knox.openai.tried";

  private volatile LeastLoaded fronts;

  @Override
  public URI getDispatchUrl(HttpServletRequest request) {
    Set<String> tried = tried(request);
    String front = fronts(request).choose(getHaProvider().getURLs(getServiceRole()), tried, System.nanoTime());
    if (front != null) {
      tried.add(front);
    }
    return BackendUrls.of(front, request);
  }

  @Override
  protected HttpEntity createRequestEntity(HttpServletRequest request) throws IOException {
    return RequestBodies.entity(request);
  }

  @Override
  public void copyRequestHeaderFields(HttpUriRequest outbound, HttpServletRequest inbound) {
    super.copyRequestHeaderFields(outbound, inbound);
    FrontAnswers.nameUser(outbound, Users.current(), UserProof.held(inbound));
  }

  @Override
  protected void executeRequest(HttpUriRequest outbound, HttpServletRequest inbound, HttpServletResponse response)
      throws IOException {
    LeastLoaded load = fronts(inbound);
    URI target = outbound.getURI();
    String front = target.getHost() == null ? null : LeastLoaded.frontOf(target);
    if (front != null) {
      load.begin(front);
    }
    HttpResponse answer;
    try {
      answer = executeOutboundRequest(outbound);
    } catch (IOException e) {
      if (front != null) {
        load.end(front);
        load.failed(front, System.nanoTime());
      }
      LOG.errorConnectingToServer(target.toString(), e);
      failoverRequest(outbound, inbound, response, null, e);
      return;
    }
    try {
      writeOutboundResponse(outbound, inbound, response, answer);
    } finally {
      if (front != null) {
        load.end(front);
      }
    }
  }

  @Override
  protected void writeOutboundResponse(HttpUriRequest outbound, HttpServletRequest inbound,
                                       HttpServletResponse response, HttpResponse answer) throws IOException {
    outboundResponseWrapper(outbound, inbound, response);
    response.setStatus(answer.getStatusLine().getStatusCode());
    copyResponseHeaderFields(response, answer);
    FrontAnswers.relay(response, answer, getInboundResponseContentType(answer.getEntity()));
  }

  private LeastLoaded fronts(HttpServletRequest request) {
    LeastLoaded f = fronts;
    if (f == null) {
      Object topology = request.getServletContext() == null ? null
          : request.getServletContext().getAttribute(GatewayServices.GATEWAY_CLUSTER_ATTRIBUTE);
      f = LeastLoaded.shared(String.valueOf(topology), getServiceRole());
      fronts = f;
    }
    return f;
  }

  @SuppressWarnings("unchecked")
  private static Set<String> tried(HttpServletRequest request) {
    Object held = request.getAttribute(TRIED);
    if (held instanceof Set) {
      return (Set<String>) held;
    }
    Set<String> tried = new HashSet<>();
    request.setAttribute(TRIED, tried);
    return tried;
  }
}
