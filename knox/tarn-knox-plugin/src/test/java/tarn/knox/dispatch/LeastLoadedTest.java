package tarn.knox.dispatch;

import org.junit.jupiter.api.Test;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LeastLoadedTest {
  private static final String A = "http://10.0.0.1:9000";
  private static final String B = "http://10.0.0.2:9000";
  private static final String C = "http://10.0.0.3:9000";
  private static final List<String> FRONTS = List.of(A, B, C);
  private static final long SECOND = 1_000_000_000L;

  @Test
  void theFrontWithTheFewestRequestsInFlightTakesTheNext() {
    LeastLoaded l = new LeastLoaded(10_000);
    l.begin(A);
    l.begin(A);
    l.begin(B);
    assertEquals(C, l.choose(FRONTS, Set.of(), 0));
    l.begin(C);
    assertTrue(Set.of(B, C).contains(l.choose(FRONTS, Set.of(), 0))); // B 1, C 1: either
    l.end(A);
    l.end(A);
    assertEquals(A, l.choose(FRONTS, Set.of(), 0)); // A back to 0
    assertEquals(0, l.inFlight(A));
    assertEquals(1, l.inFlight(B));
  }

  @Test
  void tiesGoRoundRobin() {
    LeastLoaded l = new LeastLoaded(10_000);
    List<String> picked = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      picked.add(l.choose(FRONTS, Set.of(), 0)); // nothing in flight: all tied
    }
    assertEquals(List.of(A, B, C, A, B, C), picked);
  }

  @Test
  void streamsSpreadAsTheyBegin() {
    LeastLoaded l = new LeastLoaded(10_000);
    for (int i = 0; i < 9; i++) {
      l.begin(l.choose(FRONTS, Set.of(), 0));
    }
    assertEquals(List.of(3, 3, 3), List.of(l.inFlight(A), l.inFlight(B), l.inFlight(C)));
    l.end(B);
    l.end(B);
    assertEquals(B, l.choose(FRONTS, Set.of(), 0));
  }

  @Test
  void aFrontThatFailedIsAvoidedForTheCooldownWhileAnotherIsListed() {
    LeastLoaded l = new LeastLoaded(10_000);
    l.begin(B);
    l.failed(A, 0);
    assertEquals(B, l.choose(List.of(A, B), Set.of(), 5 * SECOND)); // A idle but failed 5 s ago
    assertEquals(A, l.choose(List.of(A), Set.of(), 5 * SECOND)); // the only one: tried anyway
    assertEquals(A, l.choose(List.of(A, B), Set.of(), 11 * SECOND)); // cool-down over
  }

  @Test
  void aFailoverGoesToAFrontTheRequestHasNotTried() {
    LeastLoaded l = new LeastLoaded(10_000);
    assertEquals(B, l.choose(FRONTS, Set.of(A), 0));
    assertEquals(C, l.choose(FRONTS, Set.of(A, B), 0));
    assertEquals(A, l.choose(List.of(A), Set.of(A), 0)); // every front tried: again
    assertNull(l.choose(List.of(), Set.of(), 0));
  }

  @Test
  void countsEndAtZeroAndAFrontIsItsSchemeHostAndPort() {
    LeastLoaded l = new LeastLoaded(10_000);
    l.end(A);
    assertEquals(0, l.inFlight(A));
    assertEquals(A, LeastLoaded.frontOf(URI.create(A + "/v1/chat/completions?x=1")));
  }
}
