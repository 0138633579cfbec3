package tarn.knox.ha;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.curator.test.TestingServer;
import org.apache.knox.gateway.ha.provider.impl.DefaultHaServiceConfig;
import org.apache.zookeeper.CreateMode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

class TritonURLManagerTest {
  private static final String PATH = "/services/triton/instances";

  private TestingServer zk;
  private CuratorFramework controller; // writes znodes as TARN's controller does (ephemeral)
  private InstanceWatcher watcher;

  @BeforeEach
  void start() throws Exception {
    zk = new TestingServer(true);
    controller = CuratorFrameworkFactory.newClient(zk.getConnectString(), 30_000, 5_000, new RetryOneTime(200));
    controller.start();
    controller.blockUntilConnected();
  }

  @AfterEach
  void stop() throws Exception {
    if (watcher != null) {
      watcher.close();
    }
    controller.close();
    zk.close();
  }

  private void register(String container, String ip, int port) throws Exception {
    String json = "{\"service\":\"tarn-demo\",\"instance\":\"triton\",\"container_id\":\"" + container
        + "\",\"host\":\"worker1\",\"ip\":\"" + ip + "\",\"http_port\":" + port + ",\"grpc_port\":8001,"
        + "\"metrics_port\":8002,\"url\":\"http://" + ip + ":" + port + "\",\"models\":[\"add_one\"]}";
    controller.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL)
        .forPath(PATH + "/" + container, json.getBytes(StandardCharsets.UTF_8));
  }

  private void registerWithFront(String container, String ip, int port, int openaiPort) throws Exception {
    String json = "{\"container_id\":\"" + container + "\",\"ip\":\"" + ip + "\",\"http_port\":" + port
        + ",\"url\":\"http://" + ip + ":" + port + "\",\"openai_port\":" + openaiPort + "}";
    controller.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL)
        .forPath(PATH + "/" + container, json.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void theOpenAIRoleListsTheFrontsOfTheInstancesThatRunOne() throws Exception {
    DefaultHaServiceConfig c = new DefaultHaServiceConfig("TRITON-OPENAI");
    c.setZookeeperEnsemble("zk1:2181");
    assertTrue(new TritonURLManager().supportsConfig(c));
    registerWithFront("container_01", "10.0.0.1", 8000, 9000);
    register("container_02", "10.0.0.2", 8000); // no front: not used for /v1
    watcher = new InstanceWatcher(zk.getConnectString(), PATH, 10_000, 2_000, 30_000);
    TritonURLManager triton = new TritonURLManager();
    triton.use(watcher);
    TritonURLManager fronts = new TritonURLManager();
    fronts.servingOpenAI(true);
    fronts.use(watcher); // the same watch serves both roles
    assertEquals(List.of("http://10.0.0.1:8000", "http://10.0.0.2:8000"), triton.getURLs());
    assertEquals(List.of("http://10.0.0.1:9000"), fronts.getURLs());
    registerWithFront("container_03", "10.0.0.3", 8000, 9001);
    within(2_000, () -> fronts.getURLs().size() == 2, "the new front listed");
    assertEquals(List.of("http://10.0.0.1:9000", "http://10.0.0.3:9001"), fronts.getURLs());
    controller.delete().forPath(PATH + "/container_01");
    within(2_000, () -> fronts.getURLs().equals(List.of("http://10.0.0.3:9001")), "the withdrawn front dropped");
  }

  @Test
  void topologyUrlsGivenAfterZooKeeperListedNoInstanceServeAtOnce() throws Exception {
    // Knox's order (URLManagerLoader, then DefaultHaProvider.addHaService): setConfig, which reads
    // ZooKeeper, then setURLs with the topology's URLs. At zero the activator must serve at once.
    watcher = new InstanceWatcher(zk.getConnectString(), PATH, 10_000, 2_000, 30_000);
    TritonURLManager m = new TritonURLManager();
    m.use(watcher);
    TritonURLManager fronts = new TritonURLManager();
    fronts.servingOpenAI(true);
    fronts.use(watcher);
    assertEquals(List.of(), m.getURLs());
    m.setURLs(List.of("http://127.0.0.1:8099"));
    fronts.setURLs(List.of("http://127.0.0.1:8099"));
    assertEquals(List.of("http://127.0.0.1:8099"), m.getURLs());
    assertEquals(List.of("http://127.0.0.1:8099"), fronts.getURLs());
    register("container_01", "10.0.0.1", 8000);
    within(2_000, () -> m.getURLs().equals(List.of("http://10.0.0.1:8000")), "the instance instead");
    assertEquals(List.of("http://127.0.0.1:8099"), fronts.getURLs()); // no front: still the activator
  }

  @Test
  void theOpenAIRoleFallsBackToTheActivatorWhenNoInstanceRunsAFront() throws Exception {
    TritonURLManager fronts = new TritonURLManager();
    fronts.servingOpenAI(true);
    fronts.setURLs(List.of("http://127.0.0.1:8099")); // the activator: it serves /v1 at zero too
    register("container_01", "10.0.0.1", 8000); // an instance without a front
    watcher = new InstanceWatcher(zk.getConnectString(), PATH, 10_000, 2_000, 30_000);
    fronts.use(watcher);
    assertEquals(List.of("http://127.0.0.1:8099"), fronts.getURLs()); // it answers OpenAI's 404 there
    registerWithFront("container_02", "10.0.0.2", 8000, 9000);
    within(2_000, () -> fronts.getURLs().equals(List.of("http://10.0.0.2:9000")), "the front alone");
    controller.delete().forPath(PATH + "/container_02"); // scaled to zero
    within(2_000, () -> fronts.getURLs().equals(List.of("http://127.0.0.1:8099")), "the activator again");
  }

  private TritonURLManager manager() {
    watcher = new InstanceWatcher(zk.getConnectString(), PATH, 10_000, 2_000, 30_000);
    TritonURLManager m = new TritonURLManager();
    m.use(watcher);
    return m;
  }

  private static void within(long ms, BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.currentTimeMillis() + ms;
    while (System.currentTimeMillis() < deadline) {
      if (condition.getAsBoolean()) {
        return;
      }
      Thread.sleep(20);
    }
    fail(what + " not within " + ms + " ms");
  }

  @Test
  void supportsTritonWithAnEnsembleOnly() {
    TritonURLManager m = new TritonURLManager();
    DefaultHaServiceConfig c = new DefaultHaServiceConfig("TRITON");
    assertFalse(m.supportsConfig(c));
    c.setZookeeperEnsemble("zk1:2181,zk2:2181");
    assertTrue(m.supportsConfig(c));
    DefaultHaServiceConfig hive = new DefaultHaServiceConfig("HIVE");
    hive.setZookeeperEnsemble("zk1:2181");
    assertFalse(m.supportsConfig(hive));
    c.setZookeeperEnsemble("  ");
    assertFalse(m.supportsConfig(c));
  }

  @Test
  void instancesPathFollowsTheNamespace() {
    assertEquals("/services/triton/instances", TritonURLManager.instancesPath("/services/triton"));
    assertEquals("/services/triton/instances", TritonURLManager.instancesPath("/services/triton/"));
    assertEquals("/services/triton/instances", TritonURLManager.instancesPath("services/triton"));
    assertEquals("/services/triton/instances", TritonURLManager.instancesPath("/services/triton/instances"));
    assertEquals("/services/triton/instances", TritonURLManager.instancesPath(null));
    assertEquals("/x/instances", TritonURLManager.instancesPath("/x"));
  }

  @Test
  void setConfigReadsTheSeedsNamespace() throws Exception {
    register("container_01", "10.0.0.1", 8000);
    DefaultHaServiceConfig c = new DefaultHaServiceConfig("TRITON");
    c.setZookeeperEnsemble(zk.getConnectString());
    c.setZookeeperNamespace("/services/triton");
    TritonURLManager m = new TritonURLManager();
    assertTrue(m.supportsConfig(c));
    m.setConfig(c);
    try {
      assertEquals(List.of("http://10.0.0.1:8000"), m.getURLs());
      assertEquals("http://10.0.0.1:8000", m.getActiveURL());
    } finally {
      InstanceWatcher.shared(zk.getConnectString(), PATH).close();
    }
  }

  @Test
  void readsTheInstancesAtStartSortedByContainer() throws Exception {
    register("container_02", "10.0.0.2", 8000);
    register("container_01", "10.0.0.1", 8000);
    controller.create().forPath(PATH + "/container_bad", "{\"ip\":\"10.0.0.9\"}".getBytes(StandardCharsets.UTF_8));
    TritonURLManager m = manager();
    assertEquals(List.of("http://10.0.0.1:8000", "http://10.0.0.2:8000"), m.getURLs());
    assertEquals("http://10.0.0.1:8000", m.getActiveURL());
  }

  @Test
  void aNewInstanceServesWithinOneSecondAndAGoneOneIsDropped() throws Exception {
    register("container_01", "10.0.0.1", 8000);
    TritonURLManager m = manager();
    register("container_02", "10.0.0.2", 8000);
    within(1000, () -> m.getURLs().contains("http://10.0.0.2:8000"), "new instance listed");
    m.makeNextActiveURLAvailable(); // load balancing: the next request goes to the new one
    assertEquals("http://10.0.0.2:8000", m.getActiveURL());
    controller.delete().forPath(PATH + "/container_01");
    within(1000, () -> m.getURLs().equals(List.of("http://10.0.0.2:8000")), "removed instance dropped");
  }

  @Test
  void noPathYetThenItsCreation() throws Exception {
    TritonURLManager m = manager();
    assertNull(m.getActiveURL());
    assertEquals(List.of(), m.getURLs());
    register("container_01", "10.0.0.1", 8000);
    within(1000, () -> "http://10.0.0.1:8000".equals(m.getActiveURL()), "first instance");
    assertFalse(controller.checkExists().forPath("/services/triton") == null);
  }

  @Test
  void aZooKeeperOutageKeepsTheLastListAndRecovers() throws Exception {
    register("container_01", "10.0.0.1", 8000);
    register("container_02", "10.0.0.2", 8000);
    TritonURLManager m = manager();
    zk.stop();
    Thread.sleep(1500);
    assertEquals(List.of("http://10.0.0.1:8000", "http://10.0.0.2:8000"), m.getURLs());
    assertEquals("http://10.0.0.1:8000", m.getActiveURL());
    zk.restart();
    controller.blockUntilConnected();
    register("container_03", "10.0.0.3", 8000);
    within(5000, () -> m.getURLs().contains("http://10.0.0.3:8000"), "instance after the outage");
    assertEquals(3, m.getURLs().size());
  }

  @Test
  void markFailedSendsTheInstanceToTheBottom() throws Exception {
    register("container_01", "10.0.0.1", 8000);
    register("container_02", "10.0.0.2", 8000);
    register("container_03", "10.0.0.3", 8000);
    TritonURLManager m = manager();
    m.markFailed("http://10.0.0.1:8000/v2/models/add_one/infer");
    assertEquals("http://10.0.0.2:8000", m.getActiveURL());
    assertEquals(List.of("http://10.0.0.2:8000", "http://10.0.0.3:8000", "http://10.0.0.1:8000"), m.getURLs());
    m.markFailed("http://10.9.9.9:8000/v2"); // unknown: nothing moves
    assertEquals("http://10.0.0.2:8000", m.getActiveURL());
    m.setActiveURL("http://10.0.0.1:8000");
    assertEquals("http://10.0.0.1:8000", m.getActiveURL());
    m.makeNextActiveURLAvailable();
    assertEquals("http://10.0.0.2:8000", m.getActiveURL());
    // a change in ZooKeeper keeps the order of the instances that stay
    register("container_04", "10.0.0.4", 8000);
    within(1000, () -> m.getURLs().size() == 4, "fourth instance");
    assertEquals(List.of("http://10.0.0.2:8000", "http://10.0.0.3:8000", "http://10.0.0.1:8000", "http://10.0.0.4:8000"),
        m.getURLs());
  }

  @Test
  void topologyUrlsOnlyUntilZooKeeperIsRead() throws Exception {
    TritonURLManager m = new TritonURLManager();
    m.setURLs(List.of("http://static:8000"));
    assertEquals("http://static:8000", m.getActiveURL());
    register("container_01", "10.0.0.1", 8000);
    watcher = new InstanceWatcher(zk.getConnectString(), PATH, 10_000, 2_000, 30_000);
    m.use(watcher);
    assertEquals(List.of("http://10.0.0.1:8000"), m.getURLs());
  }

  @Test
  void topologyUrlsServeWheneverNoInstanceIsRegistered() throws Exception {
    TritonURLManager m = new TritonURLManager();
    m.setURLs(List.of("http://127.0.0.1:8099")); // the activator
    register("container_01", "10.0.0.1", 8000);
    watcher = new InstanceWatcher(zk.getConnectString(), PATH, 10_000, 2_000, 30_000);
    m.use(watcher);
    assertEquals(List.of("http://10.0.0.1:8000"), m.getURLs());
    controller.delete().forPath(PATH + "/container_01"); // scaled to zero
    within(1000, () -> "http://127.0.0.1:8099".equals(m.getActiveURL()), "the activator as fallback");
    register("container_02", "10.0.0.2", 8000); // back: the activator leaves the path
    within(1000, () -> m.getURLs().equals(List.of("http://10.0.0.2:8000")), "the new instance alone");
  }
}
