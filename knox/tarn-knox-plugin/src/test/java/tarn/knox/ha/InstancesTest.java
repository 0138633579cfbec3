package tarn.knox.ha;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;

class InstancesTest {
  private static Optional<String> url(String json) {
    return Instances.baseUrl(json.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void theControllersFormatGivesItsUrl() {
    assertEquals(Optional.of("http://10.89.42.11:8000"), url("{\"service\":\"tarn-demo\",\"instance\":\"triton-0\","
        + "\"container_id\":\"container_1763712000000_0001_01_000002\",\"host\":\"worker1\",\"ip\":\"10.89.42.11\","
        + "\"http_port\":8000,\"grpc_port\":8001,\"metrics_port\":8002,\"url\":\"http://10.89.42.11:8000\","
        + "\"models\":[\"add_one\",\"linear_onnx\"],\"some_future_key\":{\"x\":1}}"));
  }

  @Test
  void withoutUrlIpAndPortThenHostAndPort() {
    assertEquals(Optional.of("http://10.0.0.5:8000"), url("{\"ip\":\"10.0.0.5\",\"host\":\"w1\",\"http_port\":8000}"));
    assertEquals(Optional.of("http://w1:8000"), url("{\"host\":\"w1\",\"http_port\":8000,\"url\":\"not a url\"}"));
    assertEquals(Optional.of("http://[fd00::1]:8000"), url("{\"ip\":\"fd00::1\",\"http_port\":8000}"));
    assertEquals(Optional.of("https://t.example:8443"), url("{\"url\":\"https://t.example:8443/\"}"));
  }

  @Test
  void unusableDataGivesNothing() {
    assertEquals(Optional.empty(), url(""));
    assertEquals(Optional.empty(), url("not json"));
    assertEquals(Optional.empty(), url("[1,2]"));
    assertEquals(Optional.empty(), url("{\"ip\":\"10.0.0.5\"}"));
    assertEquals(Optional.empty(), url("{\"ip\":\"10.0.0.5\",\"http_port\":0}"));
    assertEquals(Optional.empty(), url("{\"url\":\"ftp://x:1\"}"));
    assertEquals(Optional.empty(), Instances.baseUrl(null));
  }

  @Test
  void theOpenAIFrontIsOnTheSameAddressAtOpenaiPort() {
    byte[] front = ("{\"ip\":\"10.89.42.11\",\"host\":\"worker1\",\"http_port\":8000,"
        + "\"url\":\"http://10.89.42.11:8000\",\"openai_port\":9000}").getBytes(StandardCharsets.UTF_8);
    assertEquals(Optional.of("http://10.89.42.11:9000"), Instances.openaiUrl(front));
    assertEquals(Optional.of("http://10.89.42.11:8000"), Instances.baseUrl(front));
    assertEquals(Optional.empty(), Instances.openaiUrl("{\"ip\":\"10.0.0.5\",\"http_port\":8000}".getBytes(StandardCharsets.UTF_8)));
    assertEquals(Optional.empty(), Instances.openaiUrl("{\"ip\":\"10.0.0.5\",\"openai_port\":0}".getBytes(StandardCharsets.UTF_8)));
    assertEquals(Optional.empty(), Instances.openaiUrl(null));
  }
}
