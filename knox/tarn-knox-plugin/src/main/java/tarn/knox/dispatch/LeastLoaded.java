package tarn.knox.dispatch;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Picks the OpenAI front for a new request: the one with the fewest requests in flight through
 * this gateway (a stream holds its front for minutes, so round robin alone piles streams onto one
 * front while another idles); ties go round robin. A front whose request failed to connect is
 * avoided for a short cool-down while another one is listed (it may still be in ZooKeeper until
 * TARN withdraws it, and with no request in flight it would otherwise draw every new one), and a
 * request's failover goes to a front it has not tried yet while there is one. The counts are this gateway's only:
 * HAProxy and other gateways keep their own.
 *
 * <p>One instance per topology and role for the JVM ({@link #shared}): Knox builds a dispatch per
 * route and per topology deployment.
 */
final class LeastLoaded {
  static final long DEFAULT_COOLDOWN_MS = Long.getLong("tarn.knox.openai.failed.cooldown.ms", 10_000);
  private static final Map<String, LeastLoaded> SHARED = new ConcurrentHashMap<>();

  private final Map<String, Integer> inFlight = new ConcurrentHashMap<>();
  private final Map<String, Long> failedAt = new ConcurrentHashMap<>();
  private final long cooldownNanos;
  private long turn;

  LeastLoaded(long cooldownMs) {
    this.cooldownNanos = Math.max(0, cooldownMs) * 1_000_000L;
  }

  static LeastLoaded shared(String topology, String role) {
    return SHARED.computeIfAbsent(topology + "|" + role, k -> new LeastLoaded(DEFAULT_COOLDOWN_MS));
  }

  /**
   * The front for the next attempt of a request among {@code fronts} (the URL manager's list),
   * the fronts in {@code tried} (this request's earlier attempts) last; null when none is listed.
   * {@code now}: System.nanoTime().
   */
  synchronized String choose(List<String> fronts, Set<String> tried, long now) {
    // first the fronts this request has not tried that did not fail lately, then those that
    // did, then (every front tried: a retry) all of them
    List<String> fresh = new ArrayList<>();
    List<String> cooling = new ArrayList<>();
    List<String> again = new ArrayList<>();
    for (String f : fronts) {
      if (f == null) {
        continue;
      }
      Long failed = failedAt.get(f);
      if (tried.contains(f)) {
        again.add(f);
      } else if (failed != null && now - failed < cooldownNanos) {
        cooling.add(f);
      } else {
        fresh.add(f);
      }
    }
    List<String> candidates = !fresh.isEmpty() ? fresh : !cooling.isEmpty() ? cooling : again;
    if (candidates.isEmpty()) {
      return null;
    }
    int least = Integer.MAX_VALUE;
    List<String> ties = new ArrayList<>();
    for (String f : candidates) {
      int n = inFlight(f);
      if (n < least) {
        least = n;
        ties.clear();
      }
      if (n == least) {
        ties.add(f);
      }
    }
    return ties.get((int) (turn++ % ties.size()));
  }

  /** A request to {@code front} begins (counted until {@link #end}). */
  void begin(String front) {
    inFlight.merge(front, 1, Integer::sum);
  }

  /** The request to {@code front} ended (answer relayed, failed, or the client left). */
  void end(String front) {
    // at zero the entry goes: a front that left ZooKeeper leaves nothing behind
    inFlight.computeIfPresent(front, (k, n) -> n <= 1 ? null : n - 1);
  }

  /** A request could not reach {@code front}: avoid it for the cool-down while others are listed. */
  void failed(String front, long now) {
    failedAt.put(front, now);
  }

  int inFlight(String front) {
    return inFlight.getOrDefault(front, 0);
  }

  /** The front's base URL ({@code scheme://host:port}) of a URL dispatched to it. */
  static String frontOf(URI uri) {
    return uri.getScheme() + "://" + uri.getRawAuthority();
  }
}
