package tarn.knox.dispatch;

import org.apache.knox.gateway.services.GatewayServices;
import org.apache.knox.gateway.services.ServiceType;
import org.apache.knox.gateway.services.registry.ServiceRegistry;
import org.junit.jupiter.api.Test;

import javax.servlet.ServletContext;
import java.lang.reflect.Proxy;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class BackendUrlsRegistryTest {
  @Test
  void withoutHaTheInstanceIsTheTopologysUrlFromKnoxsServiceRegistry() {
    ServiceRegistry registry = proxy(ServiceRegistry.class, (m, a) ->
        m.equals("lookupServiceURL") && "tarn-demo".equals(a[0]) && "TRITON".equals(a[1]) ? "http://worker1:8000" : null);
    GatewayServices services = proxy(GatewayServices.class, (m, a) ->
        m.equals("getService") && a[0] == ServiceType.SERVICE_REGISTRY_SERVICE ? registry : null);
    Map<String, Object> attributes = Map.of(
        GatewayServices.GATEWAY_CLUSTER_ATTRIBUTE, "tarn-demo", GatewayServices.GATEWAY_SERVICES_ATTRIBUTE, services);
    ServletContext context = proxy(ServletContext.class, (m, a) -> m.equals("getAttribute") ? attributes.get(a[0]) : null);

    assertEquals("http://worker1:8000", BackendUrls.registered(context, "TRITON"));
    assertNull(BackendUrls.registered(context, "OTHER"));
    assertNull(BackendUrls.registered(proxy(ServletContext.class, (m, a) -> null), "TRITON"));
  }

  interface Answer {
    Object of(String method, Object[] args);
  }

  @SuppressWarnings("unchecked")
  private static <T> T proxy(Class<T> type, Answer answer) {
    return (T) Proxy.newProxyInstance(BackendUrlsRegistryTest.class.getClassLoader(), new Class<?>[] {type},
        (p, m, a) -> answer.of(m.getName(), a == null ? new Object[0] : a));
  }
}
