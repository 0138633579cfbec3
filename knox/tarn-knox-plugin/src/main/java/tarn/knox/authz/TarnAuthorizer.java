package tarn.knox.authz;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * Asks TARN's controller {@code GET /authorize?model=&action=&user=} (header {@code X-TARN-Token})
 * and caches the answers ({@code true} and {@code false} alike) for a short time. Several
 * controller URLs may be given: they are tried in order, the one that answered first next time.
 * Never logs the token.
 *
 * <p>While no controller answers (killed, being relaunched, its node lost: issue 47), an answer
 * the controller gave within the stale bound is reused, and asked again once per TTL: the users
 * and models that were being served go on being served as they were, instead of every request
 * failing with 503 until a controller is back. A question never answered stays unavailable
 * (fail closed). A policy changed meanwhile takes effect once a controller answers again.
 */
public final class TarnAuthorizer {
  /** The answer: ALLOW and DENY come from TARN; UNAVAILABLE when no controller answered usably. */
  public enum Decision { ALLOW, DENY, UNAVAILABLE }

  public static final String TOKEN_HEADER = "X-TARN-Token";
  private static final Logger LOG = LoggerFactory.getLogger(TarnAuthorizer.class);
  private static final int MAX_ENTRIES = 10_000;

  private static final class Entry {
    final boolean allowed;
    final long expires;
    final long staleUntil; // reused while no controller answers, up to this time

    Entry(boolean allowed, long expires, long staleUntil) {
      this.allowed = allowed;
      this.expires = expires;
      this.staleUntil = staleUntil;
    }
  }

  private final List<URI> endpoints;
  private final Supplier<String> token;
  private final long ttlNanos;
  private final long staleNanos;
  private final Duration timeout;
  private final HttpClient http;
  private final Map<String, Entry> cache = new ConcurrentHashMap<>();
  private volatile int preferred;
  private volatile boolean servingStale;

  /**
   * @param endpoints the controllers' /authorize URLs, in order
   * @param token     the API token (read when asked: a rotated token file is picked up); null or
   *                  empty: every decision is UNAVAILABLE
   * @param ttlMs     how long an answer is reused (0: never)
   * @param staleMs   how long past its TTL an answer is reused while no controller answers (0: never)
   * @param timeoutMs connect and answer time limit for one controller
   */
  public TarnAuthorizer(List<URI> endpoints, Supplier<String> token, long ttlMs, long staleMs, long timeoutMs) {
    if (endpoints.isEmpty()) {
      throw new IllegalArgumentException("no /authorize URL");
    }
    this.endpoints = List.copyOf(endpoints);
    this.token = Objects.requireNonNull(token);
    this.ttlNanos = Math.max(0, ttlMs) * 1_000_000L;
    this.staleNanos = Math.max(0, staleMs) * 1_000_000L;
    this.timeout = Duration.ofMillis(timeoutMs);
    this.http = HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(timeout)
        .followRedirects(HttpClient.Redirect.NEVER)
        .build();
  }

  public Decision decide(String user, String model, String action) {
    String key = user + '\u0000' + model + '\u0000' + action;
    long now = System.nanoTime();
    Entry hit = cache.get(key);
    if (hit != null && now - hit.expires < 0) {
      return hit.allowed ? Decision.ALLOW : Decision.DENY;
    }
    Decision d = ask(user, model, action);
    if (d == Decision.UNAVAILABLE) {
      if (hit != null && now - hit.staleUntil < 0) {
        if (!servingStale) {
          servingStale = true;
          LOG.warn("no TARN controller answers: reusing its last answers (for at most {} ms past their TTL)",
              staleNanos / 1_000_000L);
        }
        // asked again in a TTL, not on every request; the stale bound stays the first answer's
        cache.put(key, new Entry(hit.allowed, now + ttlNanos, hit.staleUntil));
        return hit.allowed ? Decision.ALLOW : Decision.DENY;
      }
      return d;
    }
    if (servingStale) {
      servingStale = false;
      LOG.warn("a TARN controller answers again");
    }
    if (ttlNanos > 0) {
      if (cache.size() >= MAX_ENTRIES) {
        cache.clear();
      }
      long expires = now + ttlNanos;
      cache.put(key, new Entry(d == Decision.ALLOW, expires, expires + staleNanos));
    }
    return d;
  }

  private Decision ask(String user, String model, String action) {
    String t = token.get();
    if (t == null || t.isEmpty()) {
      LOG.error("no TARN API token (tarn.token.file / tarn.token.alias): every model request is refused (503)");
      return Decision.UNAVAILABLE;
    }
    String query = "model=" + enc(model) + "&action=" + enc(action) + "&user=" + enc(user);
    int start = preferred;
    for (int i = 0; i < endpoints.size(); i++) {
      int idx = (start + i) % endpoints.size();
      URI base = endpoints.get(idx);
      URI uri = URI.create(base + (base.getRawQuery() == null ? "?" : "&") + query);
      try {
        HttpResponse<String> r = http.send(
            HttpRequest.newBuilder(uri).timeout(timeout).header(TOKEN_HEADER, t)
                .header("Accept", "text/plain").GET().build(),
            HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        String body = r.body() == null ? "" : r.body().trim();
        if (r.statusCode() == 200 && (body.equals("true") || body.equals("false"))) {
          preferred = idx;
          return body.equals("true") ? Decision.ALLOW : Decision.DENY;
        }
        if (r.statusCode() == 400) {
          // TARN refused the question (a name it does not accept): the request is refused
          LOG.warn("TARN {} answered 400 to an authorization question: {}", base, abbreviate(body));
          preferred = idx;
          return Decision.DENY;
        }
        LOG.error("TARN {} answered {} to /authorize{}; trying the next controller if any", base,
            r.statusCode(), r.statusCode() == 401 || r.statusCode() == 403 ? " (is the token right?)" : "");
      } catch (IOException e) {
        LOG.error("TARN {} unreachable for /authorize: {}", base, e.toString());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return Decision.UNAVAILABLE;
      }
    }
    return Decision.UNAVAILABLE;
  }

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
  }

  private static String abbreviate(String s) {
    return s.length() > 200 ? s.substring(0, 200) + "…" : s;
  }
}
