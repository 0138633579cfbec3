package tarn.knox.authz;

import org.apache.knox.gateway.security.SubjectUtils;
import org.apache.knox.gateway.services.GatewayServices;
import org.apache.knox.gateway.services.ServiceType;
import org.apache.knox.gateway.services.security.AliasService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tarn.knox.Servlets;

import javax.security.auth.Subject;
import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import javax.servlet.http.HttpSession;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Model-level authorization for Triton behind Knox (provider role {@code authorization}, name
 * {@code TarnAuthz}). Server-level requests pass; a model request passes only when TARN's
 * controller answers {@code true} for the authenticated (effective) user; 403 when it answers
 * {@code false} or the path is not one TARN decides on, 503 when no controller answers. Params
 * (the topology's provider params):
 * <ul>
 *   <li>{@code tarn.authorize.url}: the controller's {@code /authorize} URL; a comma-separated
 *       list is tried in order (required)</li>
 *   <li>{@code tarn.token.file}: a file holding the API token (re-read when it changes), or</li>
 *   <li>{@code tarn.token.alias}: a Knox alias holding it (the topology's, else the gateway's;
 *       default {@code tarn.api.token}, used when no file is given)</li>
 *   <li>{@code tarn.cache.ttl.ms}: how long an answer is reused (default 5000; 0: never)</li>
 *   <li>{@code tarn.timeout.ms}: time limit for one controller (default 3000)</li>
 *   <li>{@code tarn.roles}: the service roles it decides for (default TRITON); requests of any
 *       other service of the topology are refused (403)</li>
 *   <li>{@code tarn.session.drop}: end, when the request ends, the HTTP session Knox opened for it
 *       if the client sent no session cookie (default true; false keeps Knox's behaviour)</li>
 * </ul>
 *
 * <p>Why the session drop: Knox's Shiro identity adapter opens an HTTP session on every request
 * (it keeps the user's groups there). Inference clients (tritonclient, curl, wrk) keep no cookie,
 * so each request left one session behind for the topology's sessionTimeout (30 min by default):
 * in the lab, 260,000 requests in 2 minutes filled a 256 MiB heap and the gateway fell from 2,300
 * to 48 req/s in garbage collection. Authentication does not need them: basic auth is checked on
 * every request (against Shiro's authentication cache).
 */
public class TarnAuthorizationFilter implements Filter {
  public static final String URL_PARAM = "tarn.authorize.url";
  public static final String TOKEN_FILE_PARAM = "tarn.token.file";
  public static final String TOKEN_ALIAS_PARAM = "tarn.token.alias";
  public static final String TTL_PARAM = "tarn.cache.ttl.ms";
  public static final String TIMEOUT_PARAM = "tarn.timeout.ms";
  public static final String ROLES_PARAM = "tarn.roles";
  public static final String SESSION_DROP_PARAM = "tarn.session.drop";
  public static final String RESOURCE_ROLE_PARAM = "resource.role";
  public static final String TOPOLOGY_PARAM = "topology.name";
  public static final String DEFAULT_ALIAS = "tarn.api.token";

  private static final Logger LOG = LoggerFactory.getLogger(TarnAuthorizationFilter.class);

  private TarnAuthorizer authorizer;
  private String resourceRole;
  private boolean decides;
  private boolean dropNewSessions = true;
  private String misconfigured;

  @Override
  public void init(FilterConfig config) throws ServletException {
    resourceRole = config.getInitParameter(RESOURCE_ROLE_PARAM);
    dropNewSessions = Boolean.parseBoolean(param(config, SESSION_DROP_PARAM, "true"));
    Set<String> roles = new HashSet<>();
    for (String r : param(config, ROLES_PARAM, "TRITON").split(",")) {
      if (!r.isBlank()) {
        roles.add(r.trim().toUpperCase(Locale.ROOT));
      }
    }
    decides = resourceRole != null && roles.contains(resourceRole.toUpperCase(Locale.ROOT));
    if (!decides) {
      LOG.warn("TarnAuthz: service role {} is not in {}={}; its requests are refused", resourceRole, ROLES_PARAM, roles);
      return;
    }
    try {
      List<URI> urls = new ArrayList<>();
      for (String u : param(config, URL_PARAM, "").split(",")) {
        if (!u.isBlank()) {
          URI uri = URI.create(u.trim());
          if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null) {
            throw new IllegalArgumentException(URL_PARAM + ": " + u.trim() + " is not an http(s) URL");
          }
          urls.add(uri);
        }
      }
      if (urls.isEmpty()) {
        throw new IllegalArgumentException(URL_PARAM + " missing: give TARN's /authorize URL, e.g. http://controller:8088/authorize");
      }
      long ttl = Long.parseLong(param(config, TTL_PARAM, "5000"));
      long timeout = Long.parseLong(param(config, TIMEOUT_PARAM, "3000"));
      authorizer = new TarnAuthorizer(urls, tokenSource(config), ttl, timeout);
      LOG.info("TarnAuthz for {}: /authorize at {}, answers cached {} ms", resourceRole, urls, ttl);
    } catch (RuntimeException e) {
      misconfigured = e.getMessage();
      LOG.error("TarnAuthz misconfigured, every model request is refused (503): {}", misconfigured);
    }
  }

  private static String param(FilterConfig config, String name, String dflt) {
    String v = config.getInitParameter(name);
    if (v == null) {
      v = config.getInitParameter(name.toLowerCase(Locale.ROOT));
    }
    return v == null || v.isBlank() ? dflt : v.trim();
  }

  private static Supplier<String> tokenSource(FilterConfig config) {
    String file = param(config, TOKEN_FILE_PARAM, null);
    if (file != null) {
      return new TokenFile(Paths.get(file));
    }
    String alias = param(config, TOKEN_ALIAS_PARAM, DEFAULT_ALIAS);
    String token = null;
    Object services = config.getServletContext() == null ? null
        : config.getServletContext().getAttribute(GatewayServices.GATEWAY_SERVICES_ATTRIBUTE);
    if (services instanceof GatewayServices) {
      AliasService aliases = ((GatewayServices) services).getService(ServiceType.ALIAS_SERVICE);
      String topology = config.getInitParameter(TOPOLOGY_PARAM);
      try {
        char[] v = topology == null ? null : aliases.getPasswordFromAliasForCluster(topology, alias);
        if (v == null) {
          v = aliases.getPasswordFromAliasForGateway(alias);
        }
        token = v == null ? null : new String(v).trim();
      } catch (Exception e) {
        LOG.error("TarnAuthz: reading alias {} failed: {}", alias, e.toString());
      }
    }
    if (token == null || token.isEmpty()) {
      throw new IllegalArgumentException("no TARN API token: set " + TOKEN_FILE_PARAM
          + " or create the alias " + alias + " (knoxcli create-alias " + alias + " --value …)");
    }
    String t = token;
    return () -> t;
  }

  /** The token file's content, read again when its modification time changes. */
  static final class TokenFile implements Supplier<String> {
    private final Path path;
    private FileTime seen;
    private String token;

    TokenFile(Path path) {
      this.path = path;
    }

    @Override
    public synchronized String get() {
      try {
        FileTime m = Files.getLastModifiedTime(path);
        if (!m.equals(seen)) {
          token = new String(Files.readAllBytes(path), StandardCharsets.UTF_8).trim();
          seen = m;
        }
      } catch (IOException e) {
        LOG.error("TarnAuthz: token file {} unreadable: {}", path, e.toString());
        if (token == null) {
          return null;
        }
      }
      return token;
    }
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
      throws IOException, ServletException {
    try {
      authorize(request, response, chain);
    } finally {
      if (dropNewSessions) {
        dropNewSession((HttpServletRequest) request);
      }
    }
  }

  /** Ends the request's session if it began with this request (the client sent no cookie for it). */
  static void dropNewSession(HttpServletRequest request) {
    HttpSession session = request.getSession(false);
    if (session != null) {
      try {
        if (session.isNew()) {
          session.invalidate();
        }
      } catch (IllegalStateException alreadyInvalidated) {
        // nothing left to drop
      }
    }
  }

  private void authorize(ServletRequest request, ServletResponse response, FilterChain chain)
      throws IOException, ServletException {
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    if (!decides) {
      res.sendError(HttpServletResponse.SC_FORBIDDEN);
      return;
    }
    TritonRequest what = TritonRequest.of(inboundPath(req));
    switch (what.kind) {
      case SERVER:
        chain.doFilter(request, response);
        return;
      case DENIED:
        LOG.debug("TarnAuthz: refused, {}", what.reason);
        res.sendError(HttpServletResponse.SC_FORBIDDEN);
        return;
      default:
        break;
    }
    if (authorizer == null) {
      res.sendError(HttpServletResponse.SC_SERVICE_UNAVAILABLE);
      return;
    }
    Subject subject = SubjectUtils.getCurrentSubject();
    String user = subject == null ? null : SubjectUtils.getEffectivePrincipalName(subject);
    if (user == null || user.isEmpty()) {
      res.sendError(HttpServletResponse.SC_FORBIDDEN);
      return;
    }
    switch (authorizer.decide(user, what.model, what.action)) {
      case ALLOW:
        chain.doFilter(request, response);
        return;
      case DENY:
        res.sendError(HttpServletResponse.SC_FORBIDDEN);
        return;
      default:
        res.setHeader("Retry-After", "1");
        res.sendError(HttpServletResponse.SC_SERVICE_UNAVAILABLE);
    }
  }

  /**
   * The path the client sent, without the webapp's context path. A provider's wrapper may answer
   * getRequestURI with another URL (Knox's rewrite wrapper, where a route applies one, answers the
   * rewritten target); the innermost request holds the client's.
   */
  static String inboundPath(HttpServletRequest req) {
    HttpServletRequest inner = Servlets.innermost(req);
    String uri = inner.getRequestURI();
    String ctx = inner.getContextPath();
    if (uri != null && ctx != null && !ctx.isEmpty() && uri.startsWith(ctx)) {
      uri = uri.substring(ctx.length());
    }
    return uri;
  }

  @Override
  public void destroy() {
  }
}
