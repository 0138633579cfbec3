package tarn.knox;

import org.junit.jupiter.api.Test;

import javax.servlet.ServletRequest;
import java.lang.reflect.Proxy;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

class UserProofTest {
  /**
   * The test vector tests/unit/stdlib/openai/test_trust.py checks too:
   * hmac.new(b"s3cret-token", b"v1:1700000000:alice", hashlib.sha256).hexdigest().
   */
  static final String VECTOR = "v1:1700000000:8c0d5cec8e69c00f6faae3e803e3937c7beb2f5029c1a0599be39b610b710bd9";

  static Clock at(long seconds, long nanos) {
    return Clock.fixed(Instant.ofEpochSecond(seconds, nanos), ZoneOffset.UTC);
  }

  @Test
  void theTestVector() {
    assertEquals(VECTOR, UserProof.proof("s3cret-token", 1700000000L, "alice"));
  }

  @Test
  void theClockGivesWholeSecondsAndTheTokenIsReadWhenSigning() {
    assertEquals(VECTOR, UserProof.proof("s3cret-token", at(1700000000L, 999_999_999L), "alice"));
    String[] token = {"s3cret-token"};
    UserProof proofs = new UserProof(() -> token[0], at(1700000000L, 0));
    assertEquals(VECTOR, proofs.of("alice"));
    token[0] = "rotated";
    assertEquals(UserProof.proof("rotated", 1700000000L, "alice"), proofs.of("alice"));
  }

  private static String hex(String proof) {
    return proof.substring(proof.lastIndexOf(':') + 1);
  }

  @Test
  void anotherUserTimeOrTokenIsAnotherProofAndNoneWithoutTokenOrUser() {
    String bob = UserProof.proof("s3cret-token", 1700000000L, "bob");
    assertTrue(bob.matches("v1:1700000000:[0-9a-f]{64}"), bob);
    assertNotEquals(hex(VECTOR), hex(bob));
    assertNotEquals(hex(VECTOR), hex(UserProof.proof("s3cret-token", 1700000001L, "alice")));
    assertNotEquals(hex(VECTOR), hex(UserProof.proof("other-token", 1700000000L, "alice")));
    assertNull(UserProof.proof(null, 1700000000L, "alice"));
    assertNull(UserProof.proof("", 1700000000L, "alice"));
    assertNull(UserProof.proof("s3cret-token", 1700000000L, null));
    assertNull(UserProof.proof("s3cret-token", 1700000000L, ""));
    assertNull(new UserProof(() -> null, at(1700000000L, 0)).of("alice"));
  }

  @Test
  void theFilterLeavesItOnTheRequestForTheDispatch() {
    Map<String, Object> attributes = new HashMap<>();
    ServletRequest request = (ServletRequest) Proxy.newProxyInstance(getClass().getClassLoader(),
        new Class<?>[] {ServletRequest.class}, (p, m, a) -> {
          switch (m.getName()) {
            case "getAttribute": return attributes.get((String) a[0]);
            case "setAttribute": attributes.put((String) a[0], a[1]); return null;
            default: return null;
          }
        });
    assertNull(UserProof.held(request));
    attributes.put(UserProof.HELD, "v1:1:forged");
    assertNull(UserProof.held(request));
    UserProof proofs = new UserProof(() -> "s3cret-token", Clock.systemUTC());
    proofs.hold(request);
    assertSame(proofs, UserProof.held(request));
  }
}
