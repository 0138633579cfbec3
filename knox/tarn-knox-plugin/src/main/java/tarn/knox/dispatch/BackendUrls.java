package tarn.knox.dispatch;

import org.apache.knox.gateway.services.GatewayServices;
import org.apache.knox.gateway.services.ServiceType;
import org.apache.knox.gateway.services.registry.ServiceRegistry;
import tarn.knox.Servlets;

import javax.servlet.ServletContext;
import javax.servlet.http.HttpServletRequest;
import java.net.URI;

/**
 * Where a request to the TRITON service goes: the instance's URL, then the client's path after
 * {@code <gateway>/<topology>/triton} as the client sent it (still encoded), then the query (with
 * what Knox's identity assertion adds). This is all the TRITON service's URL rewriting did, so
 * its routes run without Knox's rewrite filter and its per-request template matching (the
 * gateway's CPU per request did not measurably change: docs/knox.md).
 */
final class BackendUrls {
  /** The route prefix of the TRITON service below the topology (service.xml). */
  static final String ROUTE = "/triton";

  private BackendUrls() {
  }

  /**
   * The URL on the instance at {@code base} (e.g. {@code http://worker1:8000}); a URL with no
   * host when {@code base} is null (no instance known), which Knox's HTTP client refuses with an
   * IOException: the HA dispatch then fails over and asks again after its failoverSleep.
   */
  static URI of(String base, HttpServletRequest request) {
    HttpServletRequest client = Servlets.innermost(request);
    return of(base, client.getRequestURI(), client.getContextPath(), request.getQueryString());
  }

  /** The topology's first URL for the role (no HA), as Knox's $serviceUrl rewrite function finds it. */
  static String registered(ServletContext context, String role) {
    String topology = (String) context.getAttribute(GatewayServices.GATEWAY_CLUSTER_ATTRIBUTE);
    GatewayServices services = (GatewayServices) context.getAttribute(GatewayServices.GATEWAY_SERVICES_ATTRIBUTE);
    ServiceRegistry registry = services == null ? null : services.getService(ServiceType.SERVICE_REGISTRY_SERVICE);
    return registry == null ? null : registry.lookupServiceURL(topology, role);
  }

  static URI of(String base, String requestUri, String contextPath, String query) {
    String prefix = (contextPath == null ? "" : contextPath) + ROUTE;
    if (requestUri == null || !requestUri.startsWith(prefix)) {
      throw new IllegalArgumentException("not a TRITON request: " + requestUri);
    }
    StringBuilder url = new StringBuilder();
    if (base != null) {
      url.append(base.endsWith("/") ? base.substring(0, base.length() - 1) : base);
    }
    url.append(requestUri, prefix.length(), requestUri.length());
    if (query != null) {
      url.append('?').append(query);
    }
    return URI.create(escapeUnwise(url));
  }

  /** As Knox's dispatch does: |, space and " are let through by Jetty but not by java.net.URI. */
  private static String escapeUnwise(StringBuilder url) {
    for (int i = url.length() - 1; i >= 0; i--) {
      switch (url.charAt(i)) {
        case '|':
          url.replace(i, i + 1, "%7C");
          break;
        case ' ':
          url.replace(i, i + 1, "%20");
          break;
        case '"':
          url.replace(i, i + 1, "%22");
          break;
        default:
          break;
      }
    }
    return url.toString();
  }
}
