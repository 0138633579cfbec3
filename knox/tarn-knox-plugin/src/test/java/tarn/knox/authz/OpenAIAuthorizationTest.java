package tarn.knox.authz;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import org.apache.knox.gateway.security.PrimaryPrincipal;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tarn.knox.Servlets;
import tarn.knox.UserProof;

import javax.security.auth.Subject;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ReadListener;
import javax.servlet.ServletContext;
import javax.servlet.ServletInputStream;
import javax.servlet.ServletOutputStream;
import javax.servlet.WriteListener;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PrivilegedExceptionAction;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * TarnAuthz on the role TRITON-OPENAI against a loopback stand-in of TARN's /authorize: alice may
 * use every model but "secret"; bob may only list tiny_lm.
 */
class OpenAIAuthorizationTest {
  private static final String TOKEN = "s3cret-token-value";
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String MODELS = "{\"object\":\"list\",\"data\":["
      + "{\"id\":\"add_one\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"},"
      + "{\"id\":\"secret\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"},"
      + "{\"id\":\"tiny_lm\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"}]}";

  private HttpServer tarn;
  private final List<Map<String, String>> asked = new CopyOnWriteArrayList<>();
  private final AtomicInteger status = new AtomicInteger(200);
  private final List<String> audited = new ArrayList<>();
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
      asked.add(q);
      String user = q.get("user");
      String model = q.get("model");
      boolean ok = ("alice".equals(user) && !"secret".equals(model))
          || ("bob".equals(user) && "tiny_lm".equals(model) && "list".equals(q.get("action")));
      byte[] body = (ok ? "true" : "false").getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(status.get(), body.length);
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

  private TarnAuthorizationFilter filter() throws Exception {
    Path token = dir.resolve("token");
    Files.writeString(token, TOKEN);
    Map<String, String> params = Map.of("tarn.authorize.url", url, "tarn.token.file", token.toString(),
        "tarn.cache.ttl.ms", "0", "resource.role", "TRITON-OPENAI");
    TarnAuthorizationFilter f = new TarnAuthorizationFilter();
    f.init((FilterConfig) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {FilterConfig.class},
        (p, m, a) -> {
          switch (m.getName()) {
            case "getInitParameter": return params.get((String) a[0]);
            case "getInitParameterNames": return Collections.enumeration(params.keySet());
            case "getServletContext": return Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {ServletContext.class}, (p2, m2, a2) -> null);
            default: return null;
          }
        }));
    f.auditTo((model, action, allowed) -> audited.add(action + " " + model + " " + (allowed ? "allowed" : "denied")));
    return f;
  }

  /** What the client got, or what went on to the dispatch. */
  static final class Outcome {
    int status = 200;
    String contentType;
    final Map<String, String> headers = new HashMap<>();
    final ByteArrayOutputStream body = new ByteArrayOutputStream();
    boolean passed;
    Object heldBody;
    UserProof proofs;

    JsonNode json() throws Exception {
      return JSON.readTree(body.toByteArray());
    }
  }

  private static HttpServletRequest request(String uri, byte[] body) {
    Map<String, Object> attributes = new HashMap<>();
    ByteArrayInputStream in = new ByteArrayInputStream(body == null ? new byte[0] : body);
    ServletInputStream stream = new ServletInputStream() {
      @Override
      public boolean isFinished() {
        return in.available() == 0;
      }

      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setReadListener(ReadListener l) {
      }

      @Override
      public int read() {
        return in.read();
      }
    };
    return (HttpServletRequest) Proxy.newProxyInstance(OpenAIAuthorizationTest.class.getClassLoader(),
        new Class<?>[] {HttpServletRequest.class}, (p, m, a) -> {
          switch (m.getName()) {
            case "getRequestURI": return uri;
            case "getContextPath": return "/gateway/tarn";
            case "getMethod": return body == null ? "GET" : "POST";
            case "getContentType": return body == null ? null : "application/json";
            case "getContentLengthLong": return body == null ? -1L : (long) body.length;
            case "getInputStream": return stream;
            case "getAttribute": return attributes.get((String) a[0]);
            case "setAttribute": attributes.put((String) a[0], a[1]); return null;
            default: return null;
          }
        });
  }

  private static HttpServletResponse response(Outcome o) {
    ServletOutputStream out = new ServletOutputStream() {
      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setWriteListener(WriteListener l) {
      }

      @Override
      public void write(int b) {
        o.body.write(b);
      }
    };
    return (HttpServletResponse) Proxy.newProxyInstance(OpenAIAuthorizationTest.class.getClassLoader(),
        new Class<?>[] {HttpServletResponse.class}, (p, m, a) -> {
          switch (m.getName()) {
            case "setStatus": o.status = (Integer) a[0]; return null;
            case "getStatus": return o.status;
            case "sendError": o.status = (Integer) a[0]; return null;
            case "setContentType": o.contentType = (String) a[0]; return null;
            case "setHeader": case "addHeader": o.headers.put(((String) a[0]).toLowerCase(), (String) a[1]); return null;
            case "setContentLength": o.headers.put("content-length", String.valueOf(a[0])); return null;
            case "getOutputStream": return out;
            case "isCommitted": return false;
            default: return null;
          }
        });
  }

  /** Runs the filter as {@code user}; {@code front} plays the dispatch (the front's answer). */
  private Outcome run(String user, String uri, String body, FilterChain front) throws Exception {
    TarnAuthorizationFilter f = filter();
    Outcome o = new Outcome();
    HttpServletRequest req = request(uri, body == null ? null : body.getBytes(StandardCharsets.UTF_8));
    FilterChain chain = (rq, rs) -> {
      o.passed = true;
      o.heldBody = rq.getAttribute(Servlets.HELD_BODY);
      o.proofs = UserProof.held(rq);
      front.doFilter(rq, rs);
    };
    Subject s = new Subject();
    s.getPrincipals().add(new PrimaryPrincipal(user));
    Subject.doAs(s, (PrivilegedExceptionAction<Void>) () -> {
      f.doFilter(req, response(o), chain);
      return null;
    });
    return o;
  }

  private static final FilterChain NOTHING = (rq, rs) -> { };

  @Test
  void aGenerationIsInferOnTheModelItsBodyNamesAndItsBodyPassesOnUnchanged() throws Exception {
    String body = "{\"model\":\"tiny_lm\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}";
    Outcome o = run("alice", "/gateway/tarn/triton/v1/chat/completions", body, NOTHING);
    assertTrue(o.passed);
    assertArrayEquals(body.getBytes(StandardCharsets.UTF_8), (byte[]) o.heldBody);
    assertEquals(Map.of("model", "tiny_lm", "action", "infer", "user", "alice"), asked.get(0));
    assertEquals(List.of("infer tiny_lm allowed"), audited);

    Outcome c = run("alice", "/gateway/tarn/triton/v1/completions", "{\"model\":\"add_one\",\"prompt\":\"x\"}", NOTHING);
    assertTrue(c.passed);
    assertEquals("add_one", asked.get(1).get("model"));
  }

  @Test
  void aPassedRequestCarriesTheProofOfItsUserWithTheToken() throws Exception {
    Outcome o = run("alice", "/gateway/tarn/triton/v1/chat/completions", "{\"model\":\"tiny_lm\"}", NOTHING);
    assertTrue(o.passed);
    long now = System.currentTimeMillis() / 1000;
    String proof = o.proofs.of("alice");
    long ts = Long.parseLong(proof.split(":")[1]);
    assertTrue(Math.abs(now - ts) <= 2, proof);
    assertEquals(UserProof.proof(TOKEN, ts, "alice"), proof);
    assertTrue(run("alice", "/gateway/tarn/triton/v1/models", null, front(MODELS)).proofs != null);
  }

  @Test
  void aDeniedGenerationGets403InOpenAIsShape() throws Exception {
    Outcome o = run("bob", "/gateway/tarn/triton/v1/chat/completions", "{\"model\":\"tiny_lm\",\"messages\":[]}", NOTHING);
    assertEquals(false, o.passed);
    assertEquals(403, o.status);
    assertEquals("application/json", o.contentType);
    JsonNode e = o.json().get("error");
    assertEquals("permission_denied", e.get("type").asText());
    assertEquals("model_not_allowed", e.get("code").asText());
    assertTrue(e.get("param").isNull());
    assertTrue(e.get("message").asText().contains("tiny_lm"), e.toString());
    assertEquals(List.of("infer tiny_lm denied"), audited);
  }

  @Test
  void aGenerationWithoutAModelIs400AndNothingIsAsked() throws Exception {
    Outcome o = run("alice", "/gateway/tarn/triton/v1/completions", "{\"prompt\":\"x\"}", NOTHING);
    assertEquals(400, o.status);
    assertEquals("invalid_request_error", o.json().get("error").get("type").asText());
    assertTrue(asked.isEmpty());
  }

  @Test
  void aModelsEntryIsMetadataAndOtherPathsAreRefusedUnasked() throws Exception {
    assertTrue(run("alice", "/gateway/tarn/triton/v1/models/tiny_lm", null, NOTHING).passed);
    assertEquals(Map.of("model", "tiny_lm", "action", "metadata", "user", "alice"), asked.get(0));
    assertEquals(403, run("bob", "/gateway/tarn/triton/v1/models/tiny_lm", null, NOTHING).status);
    Outcome metrics = run("alice", "/gateway/tarn/triton/v1/metrics", null, NOTHING);
    assertEquals(403, metrics.status);
    assertEquals("path_not_allowed", metrics.json().get("error").get("code").asText());
    assertEquals(2, asked.size());
  }

  private static FilterChain front(String answer) {
    return (rq, rs) -> {
      HttpServletResponse r = (HttpServletResponse) rs;
      byte[] bytes = answer.getBytes(StandardCharsets.UTF_8);
      r.setStatus(200);
      r.setHeader("Content-Length", String.valueOf(bytes.length));
      r.setContentType("application/json");
      r.getOutputStream().write(bytes);
      r.getOutputStream().close();
    };
  }

  @Test
  void theModelListShowsOnlyWhatTheUserMayList() throws Exception {
    Outcome alice = run("alice", "/gateway/tarn/triton/v1/models", null, front(MODELS));
    List<String> ids = new ArrayList<>();
    alice.json().get("data").forEach(e -> ids.add(e.get("id").asText()));
    assertEquals(List.of("add_one", "tiny_lm"), ids);
    assertEquals(String.valueOf(alice.body.size()), alice.headers.get("content-length"));
    Outcome bob = run("bob", "/gateway/tarn/triton/v1/models", null, front(MODELS));
    assertEquals(1, bob.json().get("data").size());
    assertEquals("tiny_lm", bob.json().get("data").get(0).get("id").asText());
    assertTrue(asked.stream().allMatch(q -> q.get("action").equals("list")));
  }

  @Test
  void withoutTarnsAnswerEverythingIs503() throws Exception {
    status.set(500);
    Outcome list = run("alice", "/gateway/tarn/triton/v1/models", null, front(MODELS));
    assertEquals(503, list.status);
    assertEquals("authorization_unavailable", list.json().get("error").get("code").asText());
    assertEquals("1", list.headers.get("retry-after"));
    Outcome gen = run("alice", "/gateway/tarn/triton/v1/completions", "{\"model\":\"tiny_lm\"}", NOTHING);
    assertEquals(503, gen.status);
    assertEquals(false, gen.passed);
    assertNull(gen.heldBody);
  }
}
