package tarn.knox.authz;

import java.io.ByteArrayOutputStream;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * What a request to Triton's HTTP/REST API (KServe v2) asks for, from its path: the model and the
 * TARN/Ranger access type (infer, metadata, list), or server-level (no model: allowed to every
 * authenticated user), or denied (anything else: model control, shared memory, tracing, logging,
 * unknown paths). The path is everything after the first segment {@code v2}, so the gateway's
 * prefix ({@code /gateway/<topology>/triton}) does not matter.
 *
 * <pre>
 * /v2, /v2/health/live, /v2/health/ready                          server   (allowed)
 * /v2/models/M[/versions/V]                                       metadata M
 * /v2/models/M[/versions/V]/config | ready | stats                metadata M
 * /v2/models/M[/versions/V]/infer | generate | generate_stream    infer    M
 * /v2/models/stats (every model's statistics)                     metadata *
 * /v2/repository/index                                            list     *
 * </pre>
 * {@code *} is asked of TARN literally: only a policy for every model ({@code *}) allows it.
 */
public final class TritonRequest {
  public enum Kind { SERVER, MODEL, DENIED }

  /** Model name asked for the requests that concern every model. */
  public static final String ALL_MODELS = "*";

  private static final Set<String> METADATA = Set.of("config", "ready", "stats");
  private static final Set<String> INFER = Set.of("infer", "generate", "generate_stream");

  public final Kind kind;
  public final String model;
  public final String action;
  public final String reason;

  private TritonRequest(Kind kind, String model, String action, String reason) {
    this.kind = kind;
    this.model = model;
    this.action = action;
    this.reason = reason;
  }

  static TritonRequest server() {
    return new TritonRequest(Kind.SERVER, null, null, "server-level");
  }

  static TritonRequest model(String model, String action) {
    return new TritonRequest(Kind.MODEL, model, action, action + " on a model");
  }

  static TritonRequest denied(String reason) {
    return new TritonRequest(Kind.DENIED, null, null, reason);
  }

  /** Classifies a raw (still percent-encoded) request path; the query is not part of it. */
  public static TritonRequest of(String rawPath) {
    if (rawPath == null) {
      return denied("no path");
    }
    String[] parts = rawPath.split("/", -1);
    int v2 = -1;
    for (int i = 0; i < parts.length; i++) {
      if (parts[i].equals("v2")) {
        v2 = i;
        break;
      }
    }
    if (v2 < 0) {
      return denied("not Triton's v2 API");
    }
    List<String> s = new ArrayList<>();
    for (int i = v2 + 1; i < parts.length; i++) {
      boolean last = i == parts.length - 1;
      if (parts[i].isEmpty() && last) {
        break; // one trailing slash
      }
      String seg = decode(parts[i]);
      if (seg == null || seg.isEmpty() || seg.equals(".") || seg.equals("..") || seg.contains("/")
          || seg.contains(";") || !printable(seg)) {
        return denied("unusual path segment");
      }
      s.add(seg);
    }
    int n = s.size();
    if (n == 0) {
      return server();
    }
    if (s.get(0).equals("health")) {
      return n == 2 && (s.get(1).equals("live") || s.get(1).equals("ready")) ? server() : denied("unknown health path");
    }
    if (s.get(0).equals("repository")) {
      return n == 2 && s.get(1).equals("index") ? model(ALL_MODELS, "list") : denied("model repository control");
    }
    if (!s.get(0).equals("models") || n < 2) {
      return denied("not a model path");
    }
    if (n == 2 && s.get(1).equals("stats")) {
      return model(ALL_MODELS, "metadata");
    }
    String model = s.get(1);
    int rest = 2;
    if (n >= 4 && s.get(2).equals("versions")) {
      rest = 4; // versions/V
    } else if (n == 3 && s.get(2).equals("versions")) {
      return denied("no version");
    }
    if (n == rest) {
      return model(model, "metadata");
    }
    if (n == rest + 1) {
      String op = s.get(rest);
      if (METADATA.contains(op)) {
        return model(model, "metadata");
      }
      if (INFER.contains(op)) {
        return model(model, "infer");
      }
    }
    return denied("not an inference or metadata path");
  }

  private static boolean printable(String s) {
    return s.codePoints().noneMatch(c -> Character.isISOControl(c));
  }

  /** RFC 3986 percent-decoding as UTF-8 ('+' stays '+'); null when malformed. */
  static String decode(String seg) {
    if (seg.indexOf('%') < 0) {
      return seg;
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < seg.length(); i++) {
      char c = seg.charAt(i);
      if (c == '%') {
        if (i + 2 >= seg.length()) {
          return null;
        }
        int hi = Character.digit(seg.charAt(i + 1), 16);
        int lo = Character.digit(seg.charAt(i + 2), 16);
        if (hi < 0 || lo < 0) {
          return null;
        }
        out.write(hi * 16 + lo);
        i += 2;
      } else if (c < 0x80) {
        out.write(c);
      } else {
        return null; // raw non-ASCII in a request path: not from a conforming client
      }
    }
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(out.toByteArray())).toString();
    } catch (CharacterCodingException e) {
      return null;
    }
  }

  @Override
  public String toString() {
    return kind == Kind.MODEL ? action + " " + model : kind + " (" + reason + ")";
  }
}
