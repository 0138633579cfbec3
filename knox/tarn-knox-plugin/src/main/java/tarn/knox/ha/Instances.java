package tarn.knox.ha;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Optional;

/**
 * The HTTP base URLs of one Triton instance from the data of its znode (docs/discovery.md): UTF-8
 * JSON, one object. Triton's: {@code url} when it is an http(s) URL, else
 * {@code http://<ip or host>:<http_port>}; its OpenAI front's: {@code http://<ip or host>:<openai_port>}.
 * Unknown keys are ignored (the format may grow).
 */
public final class Instances {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Instances() {
  }

  /** The instance's base URL (no trailing slash), or empty when the data names none usable. */
  public static Optional<String> baseUrl(byte[] data) {
    JsonNode node = object(data);
    if (node == null) {
      return Optional.empty();
    }
    JsonNode url = node.get("url");
    if (url != null && url.isTextual()) {
      Optional<String> parsed = httpUrl(url.asText());
      if (parsed.isPresent()) {
        return parsed;
      }
    }
    return onPort(node, "http_port");
  }

  /**
   * The base URL of the instance's OpenAI front, {@code http://<ip or host>:<openai_port>}
   * (docs/discovery.md), or empty when the instance runs none (no {@code openai_port}).
   */
  public static Optional<String> openaiUrl(byte[] data) {
    JsonNode node = object(data);
    return node == null ? Optional.empty() : onPort(node, "openai_port");
  }

  private static JsonNode object(byte[] data) {
    if (data == null || data.length == 0) {
      return null;
    }
    JsonNode node;
    try {
      node = JSON.readTree(new String(data, StandardCharsets.UTF_8));
    } catch (IOException e) {
      return null;
    }
    return node != null && node.isObject() ? node : null;
  }

  private static Optional<String> onPort(JsonNode node, String portKey) {
    JsonNode port = node.get(portKey);
    if (port == null || !port.canConvertToInt() || port.asInt() < 1 || port.asInt() > 65535) {
      return Optional.empty();
    }
    for (String key : new String[] {"ip", "host"}) {
      JsonNode host = node.get(key);
      if (host != null && host.isTextual() && !host.asText().isBlank()) {
        String h = host.asText().trim();
        if (h.contains(":") && !h.startsWith("[")) {
          h = "[" + h + "]"; // an IPv6 address
        }
        return httpUrl("http://" + h + ":" + port.asInt());
      }
    }
    return Optional.empty();
  }

  private static Optional<String> httpUrl(String text) {
    try {
      URI uri = new URI(text.trim());
      String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
      if (!(scheme.equals("http") || scheme.equals("https")) || uri.getHost() == null) {
        return Optional.empty();
      }
      String s = uri.toString();
      while (s.endsWith("/")) {
        s = s.substring(0, s.length() - 1);
      }
      return Optional.of(s);
    } catch (Exception e) {
      return Optional.empty();
    }
  }
}
