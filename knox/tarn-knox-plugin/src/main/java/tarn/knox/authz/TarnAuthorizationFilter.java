package tarn.knox.authz;

import org.apache.knox.gateway.audit.api.Action;
import org.apache.knox.gateway.audit.api.ActionOutcome;
import org.apache.knox.gateway.audit.api.AuditServiceFactory;
import org.apache.knox.gateway.audit.api.Auditor;
import org.apache.knox.gateway.audit.log4j.audit.AuditConstants;
import org.apache.knox.gateway.services.GatewayServices;
import org.apache.knox.gateway.services.ServiceType;
import org.apache.knox.gateway.services.security.AliasService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tarn.knox.Servlets;
import tarn.knox.UserProof;
import tarn.knox.Users;

import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletOutputStream;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.WriteListener;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import javax.servlet.http.HttpServletResponseWrapper;
import javax.servlet.http.HttpSession;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.FileTime;
import java.time.Clock;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Model-level authorization for Triton behind Knox (provider role {@code authorization}, name
 * {@code TarnAuthz}), for Triton's API (role TRITON) and OpenAI's on the instances' fronts (role
 * TRITON-OPENAI, answered in OpenAI's error shape). Server-level requests pass; a model request passes only when TARN's
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
 *   <li>{@code tarn.cache.stale.ms}: how long past its TTL an answer is reused while no controller
 *       answers (default 900000: a controller away for minutes does not stop the users being
 *       served; 0: never, every request then fails with 503 until a controller answers)</li>
 *   <li>{@code tarn.timeout.ms}: time limit for one controller (default 3000)</li>
 *   <li>{@code tarn.roles}: the service roles it decides for (default TRITON,TRITON-OPENAI);
 *       requests of any other service of the topology are refused (403)</li>
 *   <li>{@code tarn.session.drop}: end, when the request ends, the HTTP session Knox opened for it
 *       if the client sent no session cookie (default true; false keeps Knox's behaviour)</li>
 * </ul>
 *
 * <p>The API token also proves to the OpenAI fronts the user Knox names in {@code X-TARN-User}: a
 * request passed on for TRITON-OPENAI carries a {@link UserProof} reading the same token, with
 * which the dispatch signs that user ({@code X-TARN-User-Proof}); a front believes the name only
 * with it (anyone who reaches a front's port can send a name).
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
  public static final String STALE_PARAM = "tarn.cache.stale.ms";
  public static final String TIMEOUT_PARAM = "tarn.timeout.ms";
  public static final String ROLES_PARAM = "tarn.roles";
  public static final String SESSION_DROP_PARAM = "tarn.session.drop";
  public static final String RESOURCE_ROLE_PARAM = "resource.role";
  public static final String TOPOLOGY_PARAM = "topology.name";
  public static final String DEFAULT_ALIAS = "tarn.api.token";
  /** The role of the instances' OpenAI fronts (knox role's service triton-openai). */
  public static final String OPENAI_ROLE = "TRITON-OPENAI";
  /** The largest OpenAI request body read for its model (as RequestBodies' replay limit). */
  static final int OPENAI_BODY_LIMIT = (int) Math.min(Integer.MAX_VALUE - 8,
      Long.getLong("tarn.knox.replay.limit", 8L << 20));

  /** One audit line for a decision on a model (Knox's audit log; a stand-in in tests). */
  interface AuditLine {
    void decided(String model, String action, boolean allowed);
  }

  private static final Logger LOG = LoggerFactory.getLogger(TarnAuthorizationFilter.class);

  private TarnAuthorizer authorizer;
  private String resourceRole;
  private boolean decides;
  private boolean openai;
  private AuditLine audit = (model, action, allowed) -> { };
  private UserProof proofs;
  private boolean dropNewSessions = true;
  private String misconfigured;

  @Override
  public void init(FilterConfig config) throws ServletException {
    resourceRole = config.getInitParameter(RESOURCE_ROLE_PARAM);
    dropNewSessions = Boolean.parseBoolean(param(config, SESSION_DROP_PARAM, "true"));
    Set<String> roles = new HashSet<>();
    for (String r : param(config, ROLES_PARAM, "TRITON," + OPENAI_ROLE).split(",")) {
      if (!r.isBlank()) {
        roles.add(r.trim().toUpperCase(Locale.ROOT));
      }
    }
    decides = resourceRole != null && roles.contains(resourceRole.toUpperCase(Locale.ROOT));
    openai = OPENAI_ROLE.equalsIgnoreCase(resourceRole);
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
      long stale = Long.parseLong(param(config, STALE_PARAM, "900000"));
      long timeout = Long.parseLong(param(config, TIMEOUT_PARAM, "3000"));
      Supplier<String> token = tokenSource(config);
      authorizer = new TarnAuthorizer(urls, token, ttl, stale, timeout);
      if (openai) {
        proofs = new UserProof(token, Clock.systemUTC());
        audit = knoxAudit();
      }
      LOG.info("TarnAuthz for {}: /authorize at {}, answers cached {} ms, reused {} ms more while no controller answers",
          resourceRole, urls, ttl, stale);
    } catch (RuntimeException e) {
      misconfigured = e.getMessage();
      LOG.error("TarnAuthz misconfigured, every model request is refused (503): {}", misconfigured);
    }
  }

  /**
   * Knox's audit log: one line per decision on an OpenAI request, naming the model as the resource
   * (its URL names none for a generation), with the user Knox's audit context carries.
   */
  private static AuditLine knoxAudit() {
    try {
      Auditor auditor = AuditServiceFactory.getAuditService().getAuditor(AuditConstants.DEFAULT_AUDITOR_NAME,
          AuditConstants.KNOX_SERVICE_NAME, AuditConstants.KNOX_COMPONENT_NAME);
      return (model, action, allowed) -> auditor.audit(Action.AUTHORIZATION, model, "model",
          allowed ? ActionOutcome.SUCCESS : ActionOutcome.FAILURE, action);
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("TarnAuthz: Knox's audit log unavailable ({}); OpenAI decisions are not audited", e.toString());
      return (model, action, allowed) -> { };
    }
  }

  /** Replaces the audit log (tests). */
  void auditTo(AuditLine line) {
    audit = line;
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
    if (openai) {
      try {
        authorizeOpenAI(req, res, chain);
      } catch (OpenAIBodies.Refusal refusal) {
        if (refusal.status == HttpServletResponse.SC_SERVICE_UNAVAILABLE) {
          res.setHeader("Retry-After", "1");
        }
        OpenAIBodies.send(res, refusal);
      }
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
    String user = Users.current();
    if (user == null) {
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
   * OpenAI's API (role TRITON-OPENAI), decided as Triton's: the model and access type from the
   * path (TritonRequest.ofOpenAI), for a generation the model its JSON body names (the body read
   * once, held for the dispatch, passed on unchanged), /v1/models passed on and its answer cut to
   * the models the user may list. Refusals answer in OpenAI's error shape.
   */
  private void authorizeOpenAI(HttpServletRequest req, HttpServletResponse res, FilterChain chain)
      throws IOException, ServletException, OpenAIBodies.Refusal {
    String path = inboundPath(req);
    TritonRequest what = TritonRequest.ofOpenAI(path);
    if (what.kind == TritonRequest.Kind.DENIED) {
      LOG.debug("TarnAuthz: refused, {}", what.reason);
      throw new OpenAIBodies.Refusal(HttpServletResponse.SC_FORBIDDEN,
          "This path is not served through the gateway: " + path, "permission_denied", "path_not_allowed");
    }
    if (authorizer == null) {
      throw OpenAIBodies.unavailable();
    }
    String user = Users.current();
    if (user == null) {
      throw new OpenAIBodies.Refusal(HttpServletResponse.SC_FORBIDDEN, "No authenticated user",
          "permission_denied", "no_user");
    }
    proofs.hold(req); // the dispatch proves the user to the front with the token (if passed on)
    if (what.kind == TritonRequest.Kind.MODEL_LIST) {
      listModels(user, req, res, chain);
      return;
    }
    String model = what.model;
    if (what.kind == TritonRequest.Kind.MODEL_IN_BODY) {
      byte[] body = Servlets.holdBody(req, OPENAI_BODY_LIMIT);
      if (body == null) {
        throw new OpenAIBodies.Refusal(HttpServletResponse.SC_REQUEST_ENTITY_TOO_LARGE,
            "The request body is over " + OPENAI_BODY_LIMIT + " bytes", "invalid_request_error", "body_too_large");
      }
      model = OpenAIBodies.model(body);
    }
    TarnAuthorizer.Decision decision = authorizer.decide(user, model, what.action);
    if (decision == TarnAuthorizer.Decision.UNAVAILABLE) {
      throw OpenAIBodies.unavailable();
    }
    audit.decided(model, what.action, decision == TarnAuthorizer.Decision.ALLOW);
    if (decision != TarnAuthorizer.Decision.ALLOW) {
      throw OpenAIBodies.denied(user, what.action, model);
    }
    chain.doFilter(req, res);
  }

  /** /v1/models: the front's answer with only the models {@code user} may list. */
  private void listModels(String user, HttpServletRequest req, HttpServletResponse res, FilterChain chain)
      throws IOException, ServletException, OpenAIBodies.Refusal {
    HeldAnswer held = new HeldAnswer(res);
    chain.doFilter(req, held);
    if (held.errorSent || res.isCommitted()) {
      return;
    }
    byte[] answer = held.body.toByteArray();
    if (held.getStatus() == HttpServletResponse.SC_OK) {
      answer = OpenAIBodies.listable(answer, model -> authorizer.decide(user, model, TritonRequest.LIST));
    }
    res.setContentLength(answer.length);
    res.getOutputStream().write(answer);
    res.getOutputStream().flush();
  }

  /** Holds the body (and drops the length) the dispatch writes, so that it can be cut before it is sent. */
  static final class HeldAnswer extends HttpServletResponseWrapper {
    final ByteArrayOutputStream body = new ByteArrayOutputStream();
    boolean errorSent;
    private final ServletOutputStream out = new ServletOutputStream() {
      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setWriteListener(WriteListener listener) {
        throw new UnsupportedOperationException("blocking only");
      }

      @Override
      public void write(int b) {
        body.write(b);
      }

      @Override
      public void write(byte[] b, int off, int len) {
        body.write(b, off, len);
      }
    };
    private PrintWriter writer;

    HeldAnswer(HttpServletResponse response) {
      super(response);
    }

    @Override
    public ServletOutputStream getOutputStream() {
      return out;
    }

    @Override
    public PrintWriter getWriter() {
      if (writer == null) {
        writer = new PrintWriter(new OutputStreamWriter(out, StandardCharsets.UTF_8), true);
      }
      return writer;
    }

    @Override
    public void flushBuffer() {
      // held until the list is cut
    }

    @Override
    public void setContentLength(int len) {
      // the cut list's length is set when it is written
    }

    @Override
    public void setContentLengthLong(long len) {
      // as above
    }

    @Override
    public void setHeader(String name, String value) {
      if (!"Content-Length".equalsIgnoreCase(name)) {
        super.setHeader(name, value);
      }
    }

    @Override
    public void addHeader(String name, String value) {
      if (!"Content-Length".equalsIgnoreCase(name)) {
        super.addHeader(name, value);
      }
    }

    @Override
    public void sendError(int sc) throws IOException {
      errorSent = true;
      super.sendError(sc);
    }

    @Override
    public void sendError(int sc, String msg) throws IOException {
      errorSent = true;
      super.sendError(sc, msg);
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
