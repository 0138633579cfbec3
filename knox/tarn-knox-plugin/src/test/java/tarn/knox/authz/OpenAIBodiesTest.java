package tarn.knox.authz;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class OpenAIBodiesTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void theModelIsTheBodysModelField() throws Exception {
    assertEquals("tiny_lm", OpenAIBodies.model(utf8(
        "{\"model\":\"tiny_lm\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}")));
    assertEquals("a b/ü", OpenAIBodies.model(utf8("{\"prompt\":\"x\",\"model\":\"a b/\\u00fc\"}")));
  }

  @Test
  void aBodyWithoutAModelIsABadRequest() {
    for (String body : new String[] {"", "not json", "[1]", "{}", "{\"model\":1}", "{\"model\":\"\"}", "{\"model\":null}"}) {
      OpenAIBodies.Refusal r = assertThrows(OpenAIBodies.Refusal.class, () -> OpenAIBodies.model(utf8(body)), body);
      assertEquals(400, r.status, body);
      assertEquals("invalid_request_error", r.type, body);
    }
  }

  @Test
  void deeplyNestedBodiesAreABadRequestNotAnError() throws Exception {
    // 100,000 nested arrays overflowed readTree's stack: Knox answered 500 (issue 48, on the lab)
    String deep = "[".repeat(100_000);
    String inside = "{\"prompt\":" + deep + "}";
    for (String body : new String[] {deep, inside}) {
      OpenAIBodies.Refusal r = assertThrows(OpenAIBodies.Refusal.class, () -> OpenAIBodies.model(utf8(body)));
      assertEquals(400, r.status);
    }
    assertEquals("m", OpenAIBodies.model(utf8("{\"x\":[[{\"model\":\"no\"}]],\"model\":\"m\"}")));
  }

  @Test
  void errorsHaveOpenAIsShape() throws Exception {
    JsonNode e = JSON.readTree(OpenAIBodies.error("User 'bob' may not use model 'm'", "permission_denied", "model_not_allowed"));
    assertEquals(List.of("error"), fields(e));
    assertEquals(List.of("message", "type", "param", "code"), fields(e.get("error")));
    assertEquals("User 'bob' may not use model 'm'", e.get("error").get("message").asText());
    assertEquals("permission_denied", e.get("error").get("type").asText());
    assertTrue(e.get("error").get("param").isNull());
    assertEquals("model_not_allowed", e.get("error").get("code").asText());
    OpenAIBodies.Refusal denied = OpenAIBodies.denied("bob", "infer", "tiny_lm");
    assertEquals(403, denied.status);
    assertEquals("permission_denied", denied.type);
    assertEquals(503, OpenAIBodies.unavailable().status);
  }

  private static List<String> fields(JsonNode node) {
    List<String> names = new ArrayList<>();
    node.fieldNames().forEachRemaining(names::add);
    return names;
  }

  private static final String LIST = "{\"object\":\"list\",\"data\":["
      + "{\"id\":\"add_one\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"},"
      + "{\"id\":\"secret\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"},"
      + "{\"id\":\"tiny_lm\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"}]}";

  @Test
  void theModelListKeepsWhatTheUserMayList() throws Exception {
    List<String> asked = new ArrayList<>();
    byte[] cut = OpenAIBodies.listable(utf8(LIST), m -> {
      asked.add(m);
      return m.equals("secret") ? TarnAuthorizer.Decision.DENY : TarnAuthorizer.Decision.ALLOW;
    });
    assertEquals(List.of("add_one", "secret", "tiny_lm"), asked);
    assertEquals(JSON.readTree("{\"object\":\"list\",\"data\":["
        + "{\"id\":\"add_one\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"},"
        + "{\"id\":\"tiny_lm\",\"object\":\"model\",\"created\":1,\"owned_by\":\"tarn\"}]}"), JSON.readTree(cut));
    byte[] none = OpenAIBodies.listable(utf8(LIST), m -> TarnAuthorizer.Decision.DENY);
    assertEquals(JSON.readTree("{\"object\":\"list\",\"data\":[]}"), JSON.readTree(none));
  }

  @Test
  void theModelListFailsClosedAndLeavesOtherAnswersAlone() throws Exception {
    OpenAIBodies.Refusal r = assertThrows(OpenAIBodies.Refusal.class,
        () -> OpenAIBodies.listable(utf8(LIST), m -> m.equals("tiny_lm") ? TarnAuthorizer.Decision.UNAVAILABLE
            : TarnAuthorizer.Decision.ALLOW));
    assertEquals(503, r.status);
    for (String other : new String[] {"{\"error\":{\"message\":\"x\"}}", "not json", "[]"}) {
      assertArrayEquals(utf8(other), OpenAIBodies.listable(utf8(other), m -> TarnAuthorizer.Decision.DENY));
    }
    // an entry without an id is not shown
    byte[] odd = OpenAIBodies.listable(utf8("{\"data\":[{\"object\":\"model\"},{\"id\":\"a\"}]}"),
        m -> TarnAuthorizer.Decision.ALLOW);
    assertEquals(JSON.readTree("{\"data\":[{\"id\":\"a\"}]}"), JSON.readTree(odd));
  }
}
