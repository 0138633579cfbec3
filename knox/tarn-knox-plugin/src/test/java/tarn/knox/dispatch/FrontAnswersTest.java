package tarn.knox.dispatch;

import org.apache.http.HttpVersion;
import org.apache.http.client.methods.HttpPost;
import org.apache.http.entity.BasicHttpEntity;
import org.apache.http.message.BasicHttpResponse;
import org.junit.jupiter.api.Test;
import tarn.knox.UserProof;

import javax.servlet.ServletOutputStream;
import javax.servlet.WriteListener;
import javax.servlet.http.HttpServletResponse;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

class FrontAnswersTest {
  /** The front's body, one piece per read, recording each read and the close. */
  private static final class Pieces extends InputStream {
    final Deque<byte[]> left = new ArrayDeque<>();
    final List<String> log;

    Pieces(List<String> log, String... pieces) {
      this.log = log;
      for (String p : pieces) {
        left.add(p.getBytes(StandardCharsets.UTF_8));
      }
    }

    @Override
    public int read() {
      throw new UnsupportedOperationException();
    }

    @Override
    public int read(byte[] b, int off, int len) {
      byte[] p = left.poll();
      if (p == null) {
        return -1;
      }
      log.add("read " + new String(p, StandardCharsets.UTF_8).trim());
      System.arraycopy(p, 0, b, off, p.length);
      return p.length;
    }

    @Override
    public void close() {
      log.add("body closed");
    }
  }

  private static final class Answer extends BasicHttpResponse implements Closeable {
    final List<String> log;

    Answer(List<String> log, InputStream body, String type) {
      super(HttpVersion.HTTP_1_1, 200, "OK");
      this.log = log;
      BasicHttpEntity entity = new BasicHttpEntity();
      entity.setContent(body);
      entity.setContentType(type);
      setEntity(entity);
    }

    @Override
    public void close() {
      log.add("connection closed");
    }
  }

  private static HttpServletResponse client(List<String> log, boolean gone) {
    ServletOutputStream out = new ServletOutputStream() {
      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setWriteListener(WriteListener l) {
      }

      @Override
      public void write(int b) {
        throw new UnsupportedOperationException();
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        if (gone) {
          throw new IOException("Broken pipe");
        }
        log.add("write " + new String(b, off, len, StandardCharsets.UTF_8).trim());
      }

      @Override
      public void flush() {
        log.add("flush");
      }
    };
    return (HttpServletResponse) Proxy.newProxyInstance(FrontAnswersTest.class.getClassLoader(),
        new Class<?>[] {HttpServletResponse.class}, (p, m, a) -> m.getName().equals("getOutputStream") ? out : null);
  }

  @Test
  void eachEventIsWrittenAndFlushedAsItComes() throws Exception {
    List<String> log = new ArrayList<>();
    Pieces body = new Pieces(log, "data: {\"a\":1}\n\n", "data: {\"a\":2}\n\n", "data: [DONE]\n\n");
    FrontAnswers.relay(client(log, false), new Answer(log, body, "text/event-stream"), "text/event-stream");
    assertEquals(List.of(
        "read data: {\"a\":1}", "write data: {\"a\":1}", "flush",
        "read data: {\"a\":2}", "write data: {\"a\":2}", "flush",
        "read data: [DONE]", "write data: [DONE]", "flush",
        "flush", "body closed", "connection closed"), log);
  }

  @Test
  void aJsonAnswerIsCopiedWithoutAFlushPerPiece() throws Exception {
    List<String> log = new ArrayList<>();
    Pieces body = new Pieces(log, "{\"x\":", "1}");
    FrontAnswers.relay(client(log, false), new Answer(log, body, "application/json"), "application/json");
    assertEquals(List.of("read {\"x\":", "write {\"x\":", "read 1}", "write 1}", "flush", "body closed",
        "connection closed"), log);
  }

  @Test
  void whenTheClientLeavesTheConnectionToTheFrontIsClosedFirst() {
    List<String> log = new ArrayList<>();
    Pieces body = new Pieces(log, "data: 1\n\n", "data: 2\n\n");
    assertThrows(IOException.class, () -> FrontAnswers.relay(client(log, true),
        new Answer(log, body, "text/event-stream"), "text/event-stream"));
    // closing the body first would read the rest of the generation
    assertEquals(List.of("read data: 1", "connection closed", "body closed"), log);
  }

  private static final UserProof PROOFS = new UserProof(() -> "s3cret-token",
      Clock.fixed(Instant.ofEpochSecond(1700000000L), ZoneOffset.UTC));
  /** UserProofTest.VECTOR: alice at 1700000000 with the token s3cret-token. */
  private static final String ALICE_PROOF =
      "v1:1700000000:8c0d5cec8e69c00f6faae3e803e3937c7beb2f5029c1a0599be39b610b710bd9";

  @Test
  void theUserHeaderIsTheAuthenticatedUserAlone() {
    HttpPost post = new HttpPost("http://10.0.0.1:9000/v1/completions");
    post.addHeader("X-TARN-User", "mallory");
    post.addHeader("x-tarn-user", "eve");
    FrontAnswers.nameUser(post, "alice", null);
    assertEquals(1, post.getHeaders("X-TARN-User").length);
    assertEquals("alice", post.getFirstHeader("X-TARN-User").getValue());
    FrontAnswers.nameUser(post, null, PROOFS);
    assertNull(post.getFirstHeader("X-TARN-User"));
    FrontAnswers.nameUser(post, "a\r\nX-Evil: 1", PROOFS);
    assertNull(post.getFirstHeader("X-TARN-User"));
    assertNull(post.getFirstHeader("X-TARN-User-Proof"));
  }

  @Test
  void theClientsUserAndProofAreReplacedByTheUserAndItsProof() {
    HttpPost post = new HttpPost("http://10.0.0.1:9000/v1/completions");
    post.addHeader("X-TARN-User", "mallory");
    post.addHeader("X-TARN-User-Proof", "v1:1700000000:0000");
    post.addHeader("x-tarn-user-proof", "v1:1700000000:1111");
    FrontAnswers.nameUser(post, "alice", PROOFS);
    assertEquals(1, post.getHeaders("X-TARN-User").length);
    assertEquals("alice", post.getFirstHeader("X-TARN-User").getValue());
    assertEquals(1, post.getHeaders("X-TARN-User-Proof").length);
    assertEquals(ALICE_PROOF, post.getFirstHeader("X-TARN-User-Proof").getValue());
  }

  @Test
  void noUserNeitherHeaderAndNoTokenNoProof() {
    HttpPost post = new HttpPost("http://10.0.0.1:9000/v1/completions");
    post.addHeader("X-TARN-User", "mallory");
    post.addHeader("X-TARN-User-Proof", ALICE_PROOF);
    FrontAnswers.nameUser(post, null, PROOFS);
    assertNull(post.getFirstHeader("X-TARN-User"));
    assertNull(post.getFirstHeader("X-TARN-User-Proof"));

    post.addHeader("X-TARN-User-Proof", ALICE_PROOF);
    FrontAnswers.nameUser(post, "alice", new UserProof(() -> null, Clock.systemUTC()));
    assertEquals("alice", post.getFirstHeader("X-TARN-User").getValue());
    assertNull(post.getFirstHeader("X-TARN-User-Proof"));

    post.addHeader("X-TARN-User-Proof", ALICE_PROOF);
    FrontAnswers.nameUser(post, "alice", null); // no TarnAuthz on the request
    assertEquals("alice", post.getFirstHeader("X-TARN-User").getValue());
    assertNull(post.getFirstHeader("X-TARN-User-Proof"));
  }

  @Test
  void eventStreamsAreRecognisedByTheirType() {
    assertEquals(true, FrontAnswers.isEventStream("text/event-stream; charset=utf-8"));
    assertEquals(true, FrontAnswers.isEventStream("Text/Event-Stream"));
    assertEquals(false, FrontAnswers.isEventStream("application/json"));
    assertEquals(false, FrontAnswers.isEventStream(null));
  }
}
