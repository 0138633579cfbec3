package tarn.knox;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.servlet.ServletRequest;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.time.Clock;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The proof that goes with {@code X-TARN-User} to an OpenAI front: the front counts tokens under
 * that user only when {@code X-TARN-User-Proof: v1:<ts>:<hex>} comes with it, where {@code hex}
 * is the lowercase hex of HMAC-SHA256 of {@code v1:<ts>:<user>} (UTF-8) keyed with the service's
 * API token (UTF-8), and {@code ts} the Unix time in seconds when it was sent, within 300 s of the
 * front's clock (src/tarn/stdlib/openai/trust.py; a test vector in both test suites ties them).
 * Anyone can reach a front's port and name any user; only who holds the token (Knox, which
 * authenticated the user) can prove one.
 *
 * <p>TarnAuthz holds the token (tarn.token.file / tarn.token.alias): it leaves an instance reading
 * it on the request it authorized ({@link #hold}), and the OpenAI dispatch signs, when it sends,
 * the user it names ({@link #held}, {@link #of}). Neither the token nor a proof is ever logged.
 */
public final class UserProof {
  /** The header (src/tarn/stdlib/openai/trust.py PROOF_HEADER). */
  public static final String HEADER = "X-TARN-User-Proof";
  /** Request attribute holding the UserProof of the filter that authorized the request. */
  public static final String HELD = "tarn.knox.user.proof";
  private static final String VERSION = "v1";
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private final Supplier<String> token;
  private final Clock clock;

  /** Proofs with the token {@code token} gives when asked (null: none), at {@code clock}'s time. */
  public UserProof(Supplier<String> token, Clock clock) {
    this.token = Objects.requireNonNull(token);
    this.clock = Objects.requireNonNull(clock);
  }

  /** The header's value for {@code user} now; null without a token or a user. */
  public String of(String user) {
    return proof(token.get(), clock, user);
  }

  /** Leaves this on the request, for the dispatch. */
  public void hold(ServletRequest request) {
    request.setAttribute(HELD, this);
  }

  /** What a filter left on the request ({@link #hold}); null when none did (no TarnAuthz). */
  public static UserProof held(ServletRequest request) {
    Object held = request.getAttribute(HELD);
    return held instanceof UserProof ? (UserProof) held : null;
  }

  /** {@link #proof(String, long, String)} at {@code clock}'s time, in whole seconds. */
  public static String proof(String token, Clock clock, String user) {
    return proof(token, clock.instant().getEpochSecond(), user);
  }

  /** {@code v1:<ts>:<hex>} for {@code user} at Unix time {@code ts}; null without a token or a user. */
  public static String proof(String token, long ts, String user) {
    if (token == null || token.isEmpty() || user == null || user.isEmpty()) {
      return null;
    }
    String signed = VERSION + ":" + ts + ":" + user;
    byte[] digest;
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(token.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
      digest = mac.doFinal(signed.getBytes(StandardCharsets.UTF_8));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 unavailable", e); // every JDK has it
    }
    StringBuilder proof = new StringBuilder(VERSION.length() + 22 + 2 * digest.length)
        .append(VERSION).append(':').append(ts).append(':');
    for (byte b : digest) {
      proof.append(HEX[(b >> 4) & 0xf]).append(HEX[b & 0xf]);
    }
    return proof.toString();
  }
}
