package tarn.knox.authz;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Function;

/**
 * The JSON TarnAuthz reads and writes on OpenAI's API: the model a generation's body names, the
 * error answers in OpenAI's shape (as the front's own, src/tarn/stdlib/openai/mapping.py), and the
 * model list cut to what the user may list.
 */
final class OpenAIBodies {
  private static final ObjectMapper JSON = new ObjectMapper();

  private OpenAIBodies() {
  }

  /** A request TarnAuthz refuses, with its status and OpenAI's error fields. */
  static final class Refusal extends Exception {
    private static final long serialVersionUID = 1L;
    final int status;
    final String type;
    final String code;

    Refusal(int status, String message, String type, String code) {
      super(message, null, false, false);
      this.status = status;
      this.type = type;
      this.code = code;
    }

    static Refusal badRequest(String message, String code) {
      return new Refusal(HttpServletResponse.SC_BAD_REQUEST, message, "invalid_request_error", code);
    }
  }

  /**
   * The "model" of a generation's JSON body (chat/completions, completions). Read token by token,
   * the members other than "model" skipped without building them: a tree of 100,000 nested
   * arrays overflowed the stack in readTree, and Knox answered 500 (issue 48, the lab's hostile
   * requests).
   */
  static String model(byte[] body) throws Refusal {
    Refusal notAnObject = Refusal.badRequest("The request body must be a JSON object", "invalid_json");
    String model = null;
    try (JsonParser parser = JSON.getFactory().createParser(body)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        throw notAnObject;
      }
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        boolean isModel = "model".equals(parser.getCurrentName());
        JsonToken value = parser.nextToken();
        if (isModel) {
          model = value == JsonToken.VALUE_STRING ? parser.getText() : null;  // the last one counts, as in a tree
        }
        parser.skipChildren();
      }
      if (token != JsonToken.END_OBJECT) {
        throw notAnObject;
      }
    } catch (IOException e) {
      throw notAnObject;
    }
    if (model == null || model.isEmpty()) {
      throw Refusal.badRequest("model: a model name (string) is required", "model_missing");
    }
    return model;
  }

  /** {"error": {"message", "type", "param": null, "code"}}, UTF-8. */
  static byte[] error(String message, String type, String code) {
    Map<String, Object> error = new LinkedHashMap<>();
    error.put("message", message);
    error.put("type", type);
    error.put("param", null);
    error.put("code", code);
    try {
      return JSON.writeValueAsBytes(Map.of("error", error));
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Answers with {@code status} and an OpenAI error body (application/json). */
  static void send(HttpServletResponse response, int status, String message, String type, String code)
      throws IOException {
    byte[] body = error(message, type, code);
    response.setStatus(status);
    response.setContentType("application/json");
    response.setContentLength(body.length);
    response.getOutputStream().write(body);
    response.getOutputStream().flush();
  }

  static void send(HttpServletResponse response, Refusal refusal) throws IOException {
    send(response, refusal.status, refusal.getMessage(), refusal.type, refusal.code);
  }

  /**
   * The front's /v1/models answer with only the "data" entries whose "id" {@code decide} allows
   * (other entries and fields as they were); the answer unchanged when it is not such a list.
   * Throws UNAVAILABLE's refusal when a decision could not be had: a partial list would hide
   * models without saying so.
   */
  static byte[] listable(byte[] answer, Function<String, TarnAuthorizer.Decision> decide) throws Refusal {
    JsonNode root;
    try {
      root = JSON.readTree(answer);
    } catch (IOException e) {
      return answer;
    }
    if (root == null || !root.isObject() || !root.path("data").isArray()) {
      return answer;
    }
    ArrayNode kept = JSON.createArrayNode();
    for (JsonNode entry : root.get("data")) {
      JsonNode id = entry.path("id");
      if (!id.isTextual()) {
        continue; // nothing to decide on: not shown
      }
      TarnAuthorizer.Decision d = decide.apply(id.asText());
      if (d == TarnAuthorizer.Decision.UNAVAILABLE) {
        throw unavailable();
      }
      if (d == TarnAuthorizer.Decision.ALLOW) {
        kept.add(entry);
      }
    }
    ((ObjectNode) root).set("data", kept);
    try {
      return JSON.writeValueAsBytes(root);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  static Refusal unavailable() {
    return new Refusal(HttpServletResponse.SC_SERVICE_UNAVAILABLE,
        "TARN's authorization could not be reached; try again", "server_error", "authorization_unavailable");
  }

  static Refusal denied(String user, String action, String model) {
    return new Refusal(HttpServletResponse.SC_FORBIDDEN,
        "User '" + user + "' may not use model '" + model + "' (access '" + action + "')", "permission_denied", "model_not_allowed");
  }
}
