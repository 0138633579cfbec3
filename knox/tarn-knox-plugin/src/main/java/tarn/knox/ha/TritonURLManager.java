package tarn.knox.ha;

import org.apache.knox.gateway.ha.provider.HaServiceConfig;
import org.apache.knox.gateway.ha.provider.URLManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.URI;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;

/**
 * Knox HA URL manager for the role TRITON: the Triton instances TARN's controller registers in
 * ZooKeeper, {@code <zookeeperNamespace>/instances/<container id>} (the seeds' topology gives
 * {@code zookeeperNamespace=/services/triton}; a namespace already ending in {@code /instances} is
 * used as is). Chosen by Knox's HA provider through ServiceLoader when the topology's HaProvider
 * has a param TRITON with zookeeperEnsemble set.
 *
 * <p>For the role TRITON-OPENAI the same manager lists the instances' OpenAI fronts instead:
 * {@code http://<ip>:<openai_port>} of each znode that has {@code openai_port}; an instance without
 * it is not used for /v1. Both roles share one ZooKeeper watch per (ensemble, path).
 *
 * <p>Semantics as Knox's DefaultURLManager (the head of the list is the active URL;
 * {@code markFailed} sends the failed instance to the bottom, {@code makeNextActiveURLAvailable}
 * rotates for {@code enableLoadBalancing=true}), over a list that follows ZooKeeper: instances that
 * appear are appended (served at once with load balancing), those that disappear are dropped, the
 * order of the rest is kept. URLs given by the topology (setURLs) are the fallback: used until
 * ZooKeeper has been read once, and whenever it lists no instance. TARN's activator is meant to be
 * that URL: it holds requests until an instance is ready (scale to zero, a lone instance
 * restarting). Without topology URLs and with no instance registered the active URL is null.
 */
public class TritonURLManager implements URLManager {
  public static final String ROLE = "TRITON";
  /** The role of the instances' OpenAI fronts (their znodes' openai_port; TARN's service triton-openai). */
  public static final String OPENAI_ROLE = "TRITON-OPENAI";
  public static final String DEFAULT_NAMESPACE = "/services/triton";
  /** How long setConfig (the topology's deployment) waits for the first read of ZooKeeper. */
  static final long INITIAL_WAIT_MS = 3_000;

  private static final Logger LOG = LoggerFactory.getLogger(TritonURLManager.class);

  private final Deque<String> urls = new ArrayDeque<>();
  private List<String> configured = List.of();
  private InstanceWatcher watcher;
  private long seen = -1;
  private boolean openai;

  @Override
  public boolean supportsConfig(HaServiceConfig config) {
    return config != null
        && (ROLE.equalsIgnoreCase(config.getServiceName()) || OPENAI_ROLE.equalsIgnoreCase(config.getServiceName()))
        && config.getZookeeperEnsemble() != null && !config.getZookeeperEnsemble().trim().isEmpty();
  }

  @Override
  public void setConfig(HaServiceConfig config) {
    String ensemble = config.getZookeeperEnsemble().trim();
    String path = instancesPath(config.getZookeeperNamespace());
    openai = OPENAI_ROLE.equalsIgnoreCase(config.getServiceName());
    use(InstanceWatcher.shared(ensemble, path));
    LOG.info("{}: {} from ZooKeeper {} at {}", config.getServiceName(),
        openai ? "the instances' OpenAI fronts (openai_port)" : "Triton instances", ensemble, path);
  }

  /** Serves the instances' OpenAI fronts instead of Triton (role TRITON-OPENAI; setConfig, tests). */
  synchronized void servingOpenAI(boolean fronts) {
    openai = fronts;
    seen = -1;
  }

  /** Uses this watcher (setConfig, tests) and waits a little for its first read. */
  synchronized void use(InstanceWatcher w) {
    watcher = w;
    seen = -1;
    try {
      if (!w.awaitLoaded(INITIAL_WAIT_MS)) {
        LOG.warn("ZooKeeper not read yet for {}: no Triton instance until it is", w.path());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    sync();
  }

  /** The path holding one znode per instance, for a topology's zookeeperNamespace. */
  public static String instancesPath(String namespace) {
    String ns = namespace == null || namespace.trim().isEmpty() ? DEFAULT_NAMESPACE : namespace.trim();
    if (!ns.startsWith("/")) {
      ns = "/" + ns;
    }
    while (ns.length() > 1 && ns.endsWith("/")) {
      ns = ns.substring(0, ns.length() - 1);
    }
    if (ns.equals("/instances") || ns.endsWith("/instances")) {
      return ns;
    }
    return ns.equals("/") ? "/instances" : ns + "/instances";
  }

  /** Brings the list in line with the watcher's newest snapshot (keeping the rotation order). */
  private void sync() {
    InstanceWatcher.Snapshot s = watcher == null ? null : watcher.snapshot();
    if (s == null || !s.loaded) {
      if (urls.isEmpty()) {
        urls.addAll(configured);
      }
      return;
    }
    if (s.version == seen) {
      return;
    }
    seen = s.version;
    List<String> listed = openai ? s.openaiUrls : s.urls;
    if (listed.isEmpty()) {
      urls.clear();
      urls.addAll(configured);
      return;
    }
    Set<String> live = new HashSet<>(listed);
    urls.removeIf(u -> !live.contains(u));
    Set<String> held = new HashSet<>(urls);
    for (String u : listed) {
      if (!held.contains(u)) {
        urls.addLast(u);
      }
    }
  }

  @Override
  public synchronized String getActiveURL() {
    sync();
    return urls.peekFirst();
  }

  @Override
  public synchronized void setActiveURL(String url) {
    sync();
    if (url != null && urls.remove(url)) {
      urls.addFirst(url);
    }
  }

  @Override
  public synchronized List<String> getURLs() {
    sync();
    return new ArrayList<>(urls);
  }

  @Override
  public synchronized void setURLs(List<String> given) {
    if (given != null && !given.isEmpty()) {
      configured = List.copyOf(given);
      // Knox calls this after setConfig, whose first read of ZooKeeper may have listed no
      // instance: the list must take the fallback now, not at ZooKeeper's next change.
      urls.clear();
      seen = -1;
      sync();
    }
  }

  @Override
  public synchronized void markFailed(String url) {
    sync();
    String failed = hostPort(url);
    if (failed == null) {
      return;
    }
    for (Iterator<String> it = urls.iterator(); it.hasNext(); ) {
      String u = it.next();
      if (failed.equals(hostPort(u))) {
        it.remove();
        urls.addLast(u);
        LOG.info("Triton instance {} failed; next: {}", u, urls.peekFirst());
        return;
      }
    }
  }

  @Override
  public synchronized void makeNextActiveURLAvailable() {
    sync();
    String head = urls.pollFirst();
    if (head != null) {
      urls.addLast(head);
    }
  }

  private static String hostPort(String url) {
    try {
      URI u = URI.create(url);
      return u.getHost() == null ? null : u.getHost().toLowerCase(java.util.Locale.ROOT) + ":" + u.getPort();
    } catch (IllegalArgumentException e) {
      return null;
    }
  }
}
