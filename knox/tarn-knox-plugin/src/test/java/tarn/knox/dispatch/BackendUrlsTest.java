package tarn.knox.dispatch;

import org.junit.jupiter.api.Test;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletRequestWrapper;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

class BackendUrlsTest {
  private static final String CTX = "/gateway/tarn-demo";

  @Test
  void theClientsPathAfterTritonGoesToTheInstanceAsSent() {
    assertEquals(URI.create("http://worker1:8000/v2/models/add_one/infer"),
        BackendUrls.of("http://worker1:8000", CTX + "/triton/v2/models/add_one/infer", CTX, null));
    assertEquals(URI.create("http://worker1:8000/v2"), BackendUrls.of("http://worker1:8000/", CTX + "/triton/v2", CTX, null));
    // still encoded: a model name with a space or a slash is not decoded on the way
    assertEquals("http://w:8000/v2/models/my%20model/versions/2/ready?user.name=alice",
        BackendUrls.of("http://w:8000", CTX + "/triton/v2/models/my%20model/versions/2/ready", CTX, "user.name=alice")
            .toString());
    assertEquals("http://w:8000/v2/models/a%2Fb/infer",
        BackendUrls.of("http://w:8000", CTX + "/triton/v2/models/a%2Fb/infer", CTX, null).toString());
  }

  @Test
  void charactersJettyLetsThroughAreEscapedAsKnoxDoes() {
    assertEquals("http://w:8000/v2/models/a%7Cb/infer?q=%22x%20y%22",
        BackendUrls.of("http://w:8000", CTX + "/triton/v2/models/a|b/infer", CTX, "q=\"x y\"").toString());
  }

  @Test
  void withNoInstanceTheUrlHasNoHostSoTheHttpClientFailsAndTheHaDispatchFailsOver() {
    URI url = BackendUrls.of(null, CTX + "/triton/v2/models/add_one/infer", CTX, null);
    assertNull(url.getHost());
    assertEquals("/v2/models/add_one/infer", url.toString());
  }

  @Test
  void aPathOutsideTheTritonRouteIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> BackendUrls.of("http://w:8000", CTX + "/other/v2", CTX, null));
    assertThrows(IllegalArgumentException.class, () -> BackendUrls.of("http://w:8000", "/triton/v2", CTX, null));
  }

  @Test
  void thePathIsTheClientsBelowKnoxWrappersAndTheQueryIsKnoxs() {
    HttpServletRequest client = request(Map.of(
        "getRequestURI", CTX + "/triton/v2/models/add_one/infer", "getContextPath", CTX, "getQueryString", "a=1"));
    // as Knox's identity assertion: the query gains user.name, the path stays the client's
    HttpServletRequest asserted = new HttpServletRequestWrapper(client) {
      @Override public String getQueryString() { return "a=1&user.name=alice"; }
      @Override public String getRequestURI() { return "/somewhere/else"; }
    };
    assertEquals(URI.create("http://w:8000/v2/models/add_one/infer?a=1&user.name=alice"),
        BackendUrls.of("http://w:8000", asserted));
  }

  private static HttpServletRequest request(Map<String, String> answers) {
    return (HttpServletRequest) Proxy.newProxyInstance(BackendUrlsTest.class.getClassLoader(),
        new Class<?>[] {HttpServletRequest.class}, (p, m, a) -> answers.get(m.getName()));
  }
}
