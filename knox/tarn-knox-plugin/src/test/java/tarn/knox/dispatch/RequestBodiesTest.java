package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.junit.jupiter.api.Test;

import javax.servlet.ReadListener;
import javax.servlet.ServletInputStream;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletRequestWrapper;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.lang.reflect.Proxy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class RequestBodiesTest {
  private static HttpServletRequest client(byte[] body, String type) {
    ByteArrayInputStream in = new ByteArrayInputStream(body);
    ServletInputStream stream = new ServletInputStream() {
      @Override public int read() { return in.read(); }
      @Override public boolean isFinished() { return in.available() == 0; }
      @Override public boolean isReady() { return true; }
      @Override public void setReadListener(ReadListener l) { }
    };
    HttpServletRequest inner = (HttpServletRequest) Proxy.newProxyInstance(RequestBodiesTest.class.getClassLoader(),
        new Class<?>[] {HttpServletRequest.class}, (p, m, a) -> {
          switch (m.getName()) {
            case "getContentLengthLong": return (long) body.length;
            case "getContentLength": return body.length;
            case "getContentType": return type;
            case "getInputStream": return stream;
            default: return null;
          }
        });
    return new HttpServletRequestWrapper(inner) { // as Knox's rewrite wrapper, whose JSON filter re-serializes
      @Override public int getContentLength() { return -1; }
      @Override public long getContentLengthLong() { return -1; }
      @Override public ServletInputStream getInputStream() {
        byte[] compact = new String(body, java.nio.charset.StandardCharsets.ISO_8859_1).replace(" ", "")
            .getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
        ByteArrayInputStream rewritten = new ByteArrayInputStream(compact);
        return new ServletInputStream() {
          @Override public int read() { return rewritten.read(); }
          @Override public boolean isFinished() { return rewritten.available() == 0; }
          @Override public boolean isReady() { return true; }
          @Override public void setReadListener(ReadListener l) { }
        };
      }
    };
  }

  @Test
  void theClientsJsonIsSentAsTheClientWroteIt() throws Exception {
    // Knox's JSON filter drops the spaces; Triton must get the client's 88 bytes, not 77 of them.
    byte[] body = "{\"inputs\": [{\"name\": \"INPUT0\", \"shape\": [4], \"datatype\": \"FP32\", \"data\": [1, 2, 3, 4]}]}"
        .getBytes(java.nio.charset.StandardCharsets.UTF_8);
    assertEquals(88, body.length);
    HttpEntity e = RequestBodies.entity(client(body, "application/json"));
    assertEquals(88, e.getContentLength());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    e.writeTo(out);
    assertArrayEquals(body, out.toByteArray());
  }

  @Test
  void theClientsLengthIsKept() throws Exception {
    byte[] body = "{\"inputs\":[]}\u0000\u0001binary".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
    HttpEntity e = RequestBodies.entity(client(body, "application/octet-stream"));
    assertEquals(body.length, e.getContentLength());
    assertEquals("application/octet-stream", e.getContentType().getValue());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    e.writeTo(out);
    assertArrayEquals(body, out.toByteArray());
  }

  @Test
  void aSmallBodyCanBeSentAgainOnFailover() throws Exception {
    byte[] body = "{\"inputs\":[1,2,3]}".getBytes(java.nio.charset.StandardCharsets.UTF_8);
    HttpEntity e = RequestBodies.entity(client(body, "application/json"));
    assertEquals(true, e.isRepeatable());
    for (int i = 0; i < 2; i++) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      e.writeTo(out);
      assertArrayEquals(body, out.toByteArray());
    }
  }

  @Test
  void aStreamedBodyRefusesASecondSend() throws Exception {
    byte[] body = new byte[64];
    RequestBodies.OnceEntity e = new RequestBodies.OnceEntity(
        new org.apache.http.entity.InputStreamEntity(new ByteArrayInputStream(body), body.length));
    e.writeTo(new ByteArrayOutputStream());
    assertThrows(java.io.IOException.class, () -> e.writeTo(new ByteArrayOutputStream()));
  }

  @Test
  void formBodiesStayChunked() {
    assertEquals(-1, RequestBodies.clientLength(client(new byte[5], "application/x-www-form-urlencoded")));
    assertEquals(5, RequestBodies.clientLength(client(new byte[5], "application/json")));
  }
}
