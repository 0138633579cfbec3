package tarn.knox.authz;

import com.sun.net.httpserver.HttpServer;
import org.apache.knox.gateway.security.PrimaryPrincipal;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.security.auth.Subject;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletContext;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletRequestWrapper;
import javax.servlet.http.HttpServletResponse;
import javax.servlet.http.HttpSession;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PrivilegedExceptionAction;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The filter against a loopback stand-in for TARN's /authorize (alice may infer add_one only). */
class TarnAuthorizationFilterTest {
  private static final String TOKEN = "s3cret-token-value";

  private HttpServer tarn;
  private final List<Map<String, String>> asked = new CopyOnWriteArrayList<>();
  private final AtomicInteger status = new AtomicInteger(200);
  private String url;
  @TempDir
  Path dir;

  @BeforeEach
  void startTarn() throws Exception {
    tarn = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    tarn.createContext("/authorize", ex -> {
      Map<String, String> q = new HashMap<>();
      for (String kv : ex.getRequestURI().getRawQuery().split("&")) {
        String[] p = kv.split("=", 2);
        q.put(p[0], URLDecoder.decode(p[1], StandardCharsets.UTF_8));
      }
      q.put("token", String.valueOf(ex.getRequestHeaders().getFirst("X-TARN-Token")));
      asked.add(q);
      byte[] body;
      int code = status.get();
      if (!TOKEN.equals(q.get("token"))) {
        code = 401;
        body = "bad token".getBytes(StandardCharsets.UTF_8);
      } else if (q.get("model").isEmpty()) {
        code = 400;
        body = "model: missing".getBytes(StandardCharsets.UTF_8);
      } else {
        boolean ok = "alice".equals(q.get("user")) && "add_one".equals(q.get("model")) && "infer".equals(q.get("action"));
        body = (ok ? "true" : "false").getBytes(StandardCharsets.UTF_8);
      }
      ex.getResponseHeaders().set("Content-Type", "text/plain");
      ex.sendResponseHeaders(code, body.length);
      ex.getResponseBody().write(body);
      ex.close();
    });
    tarn.start();
    url = "http://127.0.0.1:" + tarn.getAddress().getPort() + "/authorize";
  }

  @AfterEach
  void stopTarn() {
    tarn.stop(0);
  }

  private FilterConfig config(Map<String, String> params) {
    return (FilterConfig) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {FilterConfig.class},
        (p, m, a) -> {
          switch (m.getName()) {
            case "getInitParameter": return params.get((String) a[0]);
            case "getInitParameterNames": return Collections.enumeration(params.keySet());
            case "getServletContext": return Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {ServletContext.class}, (p2, m2, a2) -> null);
            case "getFilterName": return "TarnAuthz";
            default: return null;
          }
        });
  }

  private TarnAuthorizationFilter filter(String... extra) throws Exception {
    Path token = dir.resolve("token");
    Files.writeString(token, TOKEN + "\n");
    Map<String, String> params = new HashMap<>();
    params.put("tarn.authorize.url", url);
    params.put("tarn.token.file", token.toString());
    params.put("tarn.cache.ttl.ms", "60000");
    params.put("resource.role", "TRITON");
    for (int i = 0; i < extra.length; i += 2) {
      params.put(extra[i], extra[i + 1]);
    }
    TarnAuthorizationFilter f = new TarnAuthorizationFilter();
    f.init(config(params));
    return f;
  }

  private static HttpServletRequest request(String uri) {
    return request(uri, null);
  }

  private static HttpServletRequest request(String uri, HttpSession session) {
    HttpServletRequest inner = (HttpServletRequest) Proxy.newProxyInstance(
        TarnAuthorizationFilterTest.class.getClassLoader(), new Class<?>[] {HttpServletRequest.class},
        (p, m, a) -> {
          switch (m.getName()) {
            case "getRequestURI": return uri;
            case "getContextPath": return "/gateway/tarn";
            case "getMethod": return "POST";
            case "getSession": return session;
            default: return null;
          }
        });
    // as Knox's rewrite wrapper: getRequestURI answers the backend's URL
    return new HttpServletRequestWrapper(inner) {
      @Override
      public String getRequestURI() {
        return "http://10.0.0.1:8000/v2/models/other/infer";
      }
    };
  }

  /** Runs the filter as {@code user} (null: no Subject); the status sent, or 0 when passed on. */
  private static int run(TarnAuthorizationFilter f, String user, String uri) throws Exception {
    int[] sent = {0};
    HttpServletResponse res = (HttpServletResponse) Proxy.newProxyInstance(
        TarnAuthorizationFilterTest.class.getClassLoader(), new Class<?>[] {HttpServletResponse.class},
        (p, m, a) -> {
          if (m.getName().equals("sendError")) {
            sent[0] = (Integer) a[0];
          }
          return null;
        });
    boolean[] passed = {false};
    FilterChain chain = (rq, rs) -> passed[0] = true;
    PrivilegedExceptionAction<Void> action = () -> {
      f.doFilter(request(uri), res, chain);
      return null;
    };
    if (user == null) {
      action.run();
    } else {
      Subject s = new Subject();
      s.getPrincipals().add(new PrimaryPrincipal(user));
      Subject.doAs(s, action);
    }
    assertTrue(passed[0] == (sent[0] == 0));
    return sent[0];
  }

  @Test
  void asksTarnForTheUserModelAndAction() throws Exception {
    TarnAuthorizationFilter f = filter();
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    assertEquals(Map.of("model", "add_one", "action", "infer", "user", "alice", "token", TOKEN), asked.get(0));
    assertEquals(403, run(f, "bob", "/gateway/tarn/triton/v2/models/add_one/infer"));
    assertEquals(403, run(f, "alice", "/gateway/tarn/triton/v2/models/secret/infer"));
    assertEquals(403, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/config"));
    assertEquals("metadata", asked.get(3).get("action"));
    assertEquals(403, run(f, "alice", "/gateway/tarn/triton/v2/repository/index"));
    assertEquals(Map.of("model", "*", "action", "list", "user", "alice", "token", TOKEN), asked.get(4));
  }

  @Test
  void serverLevelPassesUnaskedAndOtherPathsAreRefusedUnasked() throws Exception {
    TarnAuthorizationFilter f = filter();
    assertEquals(0, run(f, "bob", "/gateway/tarn/triton/v2/health/ready"));
    assertEquals(0, run(f, "bob", "/gateway/tarn/triton/v2"));
    assertEquals(403, run(f, "alice", "/gateway/tarn/triton/v2/repository/models/add_one/load"));
    assertTrue(asked.isEmpty());
  }

  @Test
  void answersAreCachedForTheTtl() throws Exception {
    TarnAuthorizationFilter f = filter();
    for (int i = 0; i < 5; i++) {
      assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
      assertEquals(403, run(f, "bob", "/gateway/tarn/triton/v2/models/add_one/infer"));
    }
    assertEquals(2, asked.size());
    TarnAuthorizationFilter uncached = filter("tarn.cache.ttl.ms", "0");
    run(uncached, "alice", "/gateway/tarn/triton/v2/models/add_one/infer");
    run(uncached, "alice", "/gateway/tarn/triton/v2/models/add_one/infer");
    assertEquals(4, asked.size());
  }

  @Test
  void failsClosedWhenTarnCannotAnswer() throws Exception {
    TarnAuthorizationFilter f = filter();
    status.set(500);
    assertEquals(503, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    status.set(200);
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer")); // errors are not cached
    tarn.stop(0);
    assertEquals(503, run(filter(), "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
  }

  @Test
  void whileNoControllerAnswersTheLastAnswersAreReusedWithinTheStaleBound() throws Exception {
    TarnAuthorizationFilter f = filter("tarn.cache.ttl.ms", "1000", "tarn.cache.stale.ms", "60000");
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    assertEquals(403, run(f, "bob", "/gateway/tarn/triton/v2/models/add_one/infer"));
    status.set(503); // the controller away (as a relaunch: nothing answers usably)
    Thread.sleep(1100); // past the TTL
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer")); // served as before
    assertEquals(403, run(f, "bob", "/gateway/tarn/triton/v2/models/add_one/infer")); // still refused
    int afterFirstMiss = asked.size();
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    assertEquals(afterFirstMiss, asked.size(), "asked again once per TTL, not on every request");
    assertEquals(503, run(f, "carol", "/gateway/tarn/triton/v2/models/add_one/infer")); // never answered
  }

  @Test
  void theStaleBoundEnds() throws Exception {
    TarnAuthorizationFilter f = filter("tarn.cache.ttl.ms", "20", "tarn.cache.stale.ms", "60");
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    status.set(503);
    Thread.sleep(120); // past TTL + stale
    assertEquals(503, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    TarnAuthorizationFilter never = filter("tarn.cache.ttl.ms", "20", "tarn.cache.stale.ms", "0");
    status.set(200);
    assertEquals(0, run(never, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    status.set(503);
    Thread.sleep(40);
    assertEquals(503, run(never, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
  }

  @Test
  void aSecondControllerAnswersWhenTheFirstIsDown() throws Exception {
    TarnAuthorizationFilter f = filter("tarn.authorize.url", "http://127.0.0.1:1/authorize, " + url);
    assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
  }

  @Test
  void aWrongTokenIsRefusedAndNeverLogged() throws Exception {
    PrintStream err = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      Path token = dir.resolve("wrong");
      Files.writeString(token, "wrong-token-value");
      TarnAuthorizationFilter f = filter("tarn.token.file", token.toString());
      assertEquals(503, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
      // the file is read again when it changes
      Files.writeString(token, TOKEN);
      Files.setLastModifiedTime(token, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() + 5000));
      assertEquals(0, run(f, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    } finally {
      System.setErr(err);
    }
    String log = captured.toString(StandardCharsets.UTF_8);
    assertTrue(log.contains("answered 401"), log);
    assertFalse(log.contains("wrong-token-value") || log.contains(TOKEN), log);
  }

  @Test
  void noUserNoTokenOrAnotherRoleIsRefused() throws Exception {
    assertEquals(403, run(filter(), null, "/gateway/tarn/triton/v2/models/add_one/infer"));
    TarnAuthorizationFilter noToken = new TarnAuthorizationFilter();
    noToken.init(config(Map.of("tarn.authorize.url", url, "resource.role", "TRITON")));
    assertEquals(503, run(noToken, "alice", "/gateway/tarn/triton/v2/models/add_one/infer"));
    assertEquals(0, run(noToken, "alice", "/gateway/tarn/triton/v2/health/ready"));
    assertEquals(403, run(filter("resource.role", "WEBHDFS"), "alice", "/gateway/tarn/webhdfs/v1/"));
    assertTrue(asked.isEmpty());
  }

  /** A session that records whether it was invalidated; {@code isNew}: the client sent no cookie for it. */
  private static HttpSession session(boolean isNew, boolean[] invalidated) {
    return (HttpSession) Proxy.newProxyInstance(TarnAuthorizationFilterTest.class.getClassLoader(),
        new Class<?>[] {HttpSession.class}, (p, m, a) -> {
          switch (m.getName()) {
            case "isNew": return isNew;
            case "invalidate": invalidated[0] = true; return null;
            default: return null;
          }
        });
  }

  /** Whether the filter ended the request's session, for a request as alice to {@code uri}. */
  private static boolean dropped(TarnAuthorizationFilter f, boolean isNew, String uri) throws Exception {
    boolean[] invalidated = {false};
    HttpServletResponse res = (HttpServletResponse) Proxy.newProxyInstance(
        TarnAuthorizationFilterTest.class.getClassLoader(), new Class<?>[] {HttpServletResponse.class}, (p, m, a) -> null);
    Subject s = new Subject();
    s.getPrincipals().add(new PrimaryPrincipal("alice"));
    Subject.doAs(s, (PrivilegedExceptionAction<Void>) () -> {
      f.doFilter(request(uri, session(isNew, invalidated)), res, (rq, rs) -> { });
      return null;
    });
    return invalidated[0];
  }

  @Test
  void theSessionKnoxOpenedForACookielessRequestEndsWithIt() throws Exception {
    TarnAuthorizationFilter f = filter();
    assertTrue(dropped(f, true, "/gateway/tarn/triton/v2/models/add_one/infer")); // allowed
    assertTrue(dropped(f, true, "/gateway/tarn/triton/v2/models/secret/infer")); // denied
    assertTrue(dropped(f, true, "/gateway/tarn/triton/v2/health/ready")); // server level
    assertFalse(dropped(f, false, "/gateway/tarn/triton/v2/models/add_one/infer")); // the client's own session
    assertFalse(dropped(filter("tarn.session.drop", "false"), true, "/gateway/tarn/triton/v2/models/add_one/infer"));
  }
}
