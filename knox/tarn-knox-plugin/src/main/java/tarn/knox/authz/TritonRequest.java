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
  /**
   * SERVER: no model, allowed; MODEL: {@link #action} on {@link #model}; MODEL_IN_BODY:
   * {@link #action} on the model the JSON body's "model" names (OpenAI's generations);
   * MODEL_LIST: allowed, the answer's list cut to the models the user may {@code list}
   * (OpenAI's /v1/models); DENIED: refused without asking.
   */
  public enum Kind { SERVER, MODEL, MODEL_IN_BODY, MODEL_LIST, DENIED }

  /** Model name asked for the requests that concern every model. */
  public static final String ALL_MODELS = "*";

  private static final Set<String> METADATA = Set.of("config", "ready", "stats");
  private static final Set<String> INFER = Set.of("infer", "generate", "generate_stream");
  static final String LIST = "list";

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

  static TritonRequest modelInBody(String action) {
    return new TritonRequest(Kind.MODEL_IN_BODY, null, action, action + " on the body's model");
  }

  static TritonRequest modelList() {
    return new TritonRequest(Kind.MODEL_LIST, null, LIST, "the models the user may list");
  }

  static TritonRequest denied(String reason) {
    return new TritonRequest(Kind.DENIED, null, null, reason);
  }

  /** Classifies a raw (still percent-encoded) request path; the query is not part of it. */
  public static TritonRequest of(String rawPath) {
    List<String> s = new ArrayList<>();
    TritonRequest refused = segments(rawPath, "v2", s);
    if (refused != null) {
      return refused;
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

  /**
   * Classifies a raw request path to an OpenAI front (OpenAI's API as TARN's front serves it,
   * docs/openai.md), with the same access types as Triton's: a generation is {@code infer} on
   * the model its body names, a model's entry is {@code metadata} as Triton's model metadata is,
   * and the list of models is cut to those the user may {@code list}.
   *
   * <pre>
   * /v1/models                                   MODEL_LIST  (each entry: list M)
   * /v1/models/M                                 metadata M
   * /v1/chat/completions, /v1/completions        infer, the body's "model"
   * </pre>
   * Anything else (the front's /metrics and /health included) is refused.
   */
  public static TritonRequest ofOpenAI(String rawPath) {
    List<String> s = new ArrayList<>();
    TritonRequest refused = segments(rawPath, "v1", s);
    if (refused != null) {
      return refused;
    }
    int n = s.size();
    if (n == 1 && s.get(0).equals("models")) {
      return modelList();
    }
    if (n == 2 && s.get(0).equals("models")) {
      return model(s.get(1), "metadata");
    }
    if ((n == 2 && s.get(0).equals("chat") && s.get(1).equals("completions"))
        || (n == 1 && s.get(0).equals("completions"))) {
      return modelInBody("infer");
    }
    return denied("not an OpenAI path TARN serves");
  }

  /**
   * The decoded segments after the first segment {@code api} into {@code out}; null, or the
   * refusal when there is no such segment or a segment is unusual.
   */
  private static TritonRequest segments(String rawPath, String api, List<String> out) {
    if (rawPath == null) {
      return denied("no path");
    }
    String[] parts = rawPath.split("/", -1);
    int start = -1;
    for (int i = 0; i < parts.length; i++) {
      if (parts[i].equals(api)) {
        start = i;
        break;
      }
    }
    if (start < 0) {
      return denied(api.equals("v2") ? "not Triton's v2 API" : "not the OpenAI " + api + " API");
    }
    for (int i = start + 1; i < parts.length; i++) {
      boolean last = i == parts.length - 1;
      if (parts[i].isEmpty() && last) {
        break; // one trailing slash
      }
      String seg = decode(parts[i]);
      if (seg == null || seg.isEmpty() || seg.equals(".") || seg.equals("..") || seg.contains("/")
          || seg.contains(";") || !printable(seg)) {
        return denied("unusual path segment");
      }
      out.add(seg);
    }
    return null;
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
    switch (kind) {
      case MODEL:
        return action + " " + model;
      case MODEL_IN_BODY:
        return action + " (body's model)";
      case MODEL_LIST:
        return "list (each model)";
      default:
        return kind + " (" + reason + ")";
    }
  }
}
