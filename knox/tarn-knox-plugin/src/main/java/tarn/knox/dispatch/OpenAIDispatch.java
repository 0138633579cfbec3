package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.http.HttpResponse;
import org.apache.http.client.methods.HttpUriRequest;
import org.apache.knox.gateway.dispatch.ConfigurableDispatch;
import tarn.knox.UserProof;
import tarn.knox.Users;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;

/**
 * Knox's ConfigurableDispatch for a topology without HA for TRITON-OPENAI: to the topology's first
 * TRITON-OPENAI URL, with X-TARN-User (and its proof) and the relayed answer of OpenAIHaDispatch
 * (one front: no choice of load).
 */
public class OpenAIDispatch extends ConfigurableDispatch {
  @Override
  public URI getDispatchUrl(HttpServletRequest request) {
    return BackendUrls.of(BackendUrls.registered(request.getServletContext(), getServiceRole()), request);
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
  protected void writeOutboundResponse(HttpUriRequest outbound, HttpServletRequest inbound,
                                       HttpServletResponse response, HttpResponse answer) throws IOException {
    outboundResponseWrapper(outbound, inbound, response);
    response.setStatus(answer.getStatusLine().getStatusCode());
    copyResponseHeaderFields(response, answer);
    FrontAnswers.relay(response, answer, getInboundResponseContentType(answer.getEntity()));
  }
}
