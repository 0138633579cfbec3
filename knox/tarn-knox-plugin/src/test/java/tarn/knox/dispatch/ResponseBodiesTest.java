package tarn.knox.dispatch;

import org.junit.jupiter.api.Test;

import javax.servlet.ServletOutputStream;
import javax.servlet.WriteListener;
import javax.servlet.http.HttpServletResponse;
import javax.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ResponseBodiesTest {
  @Test
  void theBodyGoesToTheContainersResponseAsTritonSentIt() throws Exception {
    ByteArrayOutputStream received = new ByteArrayOutputStream();
    boolean[] closed = {false};
    ServletOutputStream stream = new ServletOutputStream() {
      @Override public void write(int b) { received.write(b); }
      @Override public void write(byte[] b, int off, int len) { received.write(b, off, len); }
      @Override public void close() { closed[0] = true; }
      @Override public boolean isReady() { return true; }
      @Override public void setWriteListener(WriteListener l) { }
    };
    HttpServletResponse container = (HttpServletResponse) Proxy.newProxyInstance(
        ResponseBodiesTest.class.getClassLoader(), new Class<?>[] {HttpServletResponse.class},
        (p, m, a) -> m.getName().equals("getOutputStream") ? stream : null);
    // as Knox's rewrite wrappers, two deep: a body written through them would be filtered
    HttpServletResponse knox = new HttpServletResponseWrapper(new HttpServletResponseWrapper(container) {
      @Override public ServletOutputStream getOutputStream() throws IOException {
        throw new IOException("went through Knox's rewrite stream");
      }
    }) {
      @Override public ServletOutputStream getOutputStream() throws IOException {
        throw new IOException("went through Knox's rewrite stream");
      }
    };
    byte[] body = "{\"model_name\":\"add_one\",  \"outputs\":[]}\u0000\u00ff".getBytes(StandardCharsets.ISO_8859_1);
    ResponseBodies.write(knox, new ByteArrayInputStream(body));
    assertArrayEquals(body, received.toByteArray());
    assertTrue(closed[0]);
  }
}
