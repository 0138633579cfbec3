package tarn.knox.ha;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Optional;

/**
 * The HTTP base URL of one Triton instance from the data of its znode (docs/discovery.md): UTF-8
 * JSON, one object. {@code url} when it is an http(s) URL, else {@code http://<ip or host>:<http_port>}.
 * Unknown keys are ignored (the format may grow).
 */
public final class Instances {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Instances() {
  }

  /** The instance's base URL (no trailing slash), or empty when the data names none usable. */
  public static Optional<String> baseUrl(byte[] data) {
    if (data == null || data.length == 0) {
      return Optional.empty();
    }
    JsonNode node;
    try {
      node = JSON.readTree(new String(data, StandardCharsets.UTF_8));
    } catch (IOException e) {
      return Optional.empty();
    }
    if (node == null || !node.isObject()) {
      return Optional.empty();
    }
    JsonNode url = node.get("url");
    if (url != null && url.isTextual()) {
      Optional<String> parsed = httpUrl(url.asText());
      if (parsed.isPresent()) {
        return parsed;
      }
    }
    JsonNode port = node.get("http_port");
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
