package tarn.knox.ha;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Keeps the URLs of the Triton instances registered under one ZooKeeper path (one znode per
 * instance, docs/discovery.md), with plain ZooKeeper watches: a child added or removed triggers a
 * re-read at once (a missing path is watched for its creation), and a re-read also follows every
 * reconnection and a periodic safety interval. A failed read keeps the last list: a ZooKeeper
 * outage leaves the gateway serving the instances it knew. Read-only: it never creates a znode.
 *
 * <p>One watcher per (ensemble, path) for the JVM, shared by every URL manager built for it
 * (Knox builds a new manager at each deployment of a topology and never closes the old one).
 */
public final class InstanceWatcher {
  private static final Logger LOG = LoggerFactory.getLogger(InstanceWatcher.class);
  private static final Map<String, InstanceWatcher> SHARED = new ConcurrentHashMap<>();

  /**
   * What the watcher holds, sorted by znode name: Triton's URLs, and the OpenAI fronts' URLs of
   * the instances whose znode has {@code openai_port}; version grows with each change of either.
   */
  public static final class Snapshot {
    public final long version;
    public final boolean loaded;
    public final List<String> urls;
    public final List<String> openaiUrls;

    Snapshot(long version, boolean loaded, List<String> urls, List<String> openaiUrls) {
      this.version = version;
      this.loaded = loaded;
      this.urls = Collections.unmodifiableList(new ArrayList<>(urls));
      this.openaiUrls = Collections.unmodifiableList(new ArrayList<>(openaiUrls));
    }
  }

  private final String ensemble;
  private final String path;
  private final long resyncMs;
  private final CuratorFramework client;
  private final ScheduledExecutorService executor;
  private final AtomicBoolean refreshQueued = new AtomicBoolean();
  private final Watcher watcher = this::onWatch;
  private volatile Snapshot snapshot = new Snapshot(0, false, List.of(), List.of());
  private volatile boolean closed;

  /** The JVM's watcher for this ensemble and path, started on first use. */
  public static InstanceWatcher shared(String ensemble, String path) {
    return SHARED.computeIfAbsent(ensemble + "|" + path,
        k -> new InstanceWatcher(ensemble, path, 15_000, 5_000, 30_000));
  }

  /** A watcher of its own (tests); close it. */
  public InstanceWatcher(String ensemble, String path, int sessionTimeoutMs, int connectionTimeoutMs,
                         long resyncMs) {
    this.ensemble = ensemble;
    this.path = path;
    this.resyncMs = resyncMs;
    this.executor = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "tarn-knox-zk " + path);
      t.setDaemon(true);
      return t;
    });
    this.client = CuratorFrameworkFactory.builder()
        .connectString(ensemble)
        .sessionTimeoutMs(sessionTimeoutMs)
        .connectionTimeoutMs(connectionTimeoutMs)
        .retryPolicy(new RetryNTimes(2, 500))
        .build();
    client.getConnectionStateListenable().addListener((c, state) -> {
      LOG.info("ZooKeeper {} for Triton instances at {}: {}", ensemble, path, state);
      if (state == ConnectionState.CONNECTED || state == ConnectionState.RECONNECTED) {
        queueRefresh(); // watches may be gone with an expired session: set them again
      }
    });
    client.start();
    executor.scheduleWithFixedDelay(this::queueRefresh, resyncMs, resyncMs, TimeUnit.MILLISECONDS);
  }

  public String path() {
    return path;
  }

  public Snapshot snapshot() {
    return snapshot;
  }

  /** Waits up to {@code timeoutMs} for the first successful read; true if it happened. */
  public boolean awaitLoaded(long timeoutMs) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    synchronized (this) {
      while (!snapshot.loaded) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (left <= 0) {
          return false;
        }
        wait(left);
      }
    }
    return true;
  }

  public void close() {
    closed = true;
    SHARED.remove(ensemble + "|" + path, this);
    executor.shutdownNow();
    client.close();
  }

  private void onWatch(WatchedEvent event) {
    if (event.getType() != Watcher.Event.EventType.None) {
      queueRefresh();
    }
  }

  private void queueRefresh() {
    if (!closed && refreshQueued.compareAndSet(false, true)) {
      try {
        executor.execute(this::refresh);
      } catch (RuntimeException e) { // shut down
        refreshQueued.set(false);
      }
    }
  }

  private void refresh() {
    refreshQueued.set(false);
    if (closed || !client.getZookeeperClient().isConnected()) {
      return; // the reconnection queues the next read; until then the last list stands
    }
    try {
      List<String> children;
      try {
        children = new ArrayList<>(client.getChildren().usingWatcher(watcher).forPath(path));
      } catch (KeeperException.NoNodeException e) {
        // no instance was ever registered: watch for the path to appear
        if (client.checkExists().usingWatcher(watcher).forPath(path) != null) {
          queueRefresh(); // created in between
          return;
        }
        publish(List.of(), List.of());
        return;
      }
      Collections.sort(children);
      Set<String> urls = new LinkedHashSet<>();
      Set<String> openaiUrls = new LinkedHashSet<>();
      for (String child : children) {
        byte[] data;
        try {
          data = client.getData().forPath(path + "/" + child);
        } catch (KeeperException.NoNodeException e) {
          continue; // gone between the two reads; its removal fired the watch
        }
        Optional<String> url = Instances.baseUrl(data);
        if (url.isPresent()) {
          urls.add(url.get());
          Instances.openaiUrl(data).ifPresent(openaiUrls::add);
        } else {
          LOG.warn("znode {}/{}: no usable url or ip/host and http_port in its data; skipped", path, child);
        }
      }
      publish(new ArrayList<>(urls), new ArrayList<>(openaiUrls));
    } catch (Exception e) {
      LOG.warn("reading Triton instances at {} from ZooKeeper {} failed ({}); keeping the last {} URL(s)",
          path, ensemble, e.toString(), snapshot.urls.size());
      if (!closed) {
        executor.schedule(this::queueRefresh, 1, TimeUnit.SECONDS);
      }
    }
  }

  private void publish(List<String> urls, List<String> openaiUrls) {
    Snapshot old = snapshot;
    if (old.loaded && old.urls.equals(urls) && old.openaiUrls.equals(openaiUrls)) {
      return;
    }
    synchronized (this) {
      snapshot = new Snapshot(old.version + 1, true, urls, openaiUrls);
      notifyAll();
    }
    LOG.info("Triton instances at {}: {}; OpenAI fronts: {}", path, urls, openaiUrls);
  }
}
