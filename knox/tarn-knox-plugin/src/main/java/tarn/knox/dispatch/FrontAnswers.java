package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.http.HttpResponse;
import org.apache.http.client.methods.HttpUriRequest;
import tarn.knox.UserProof;

import javax.servlet.http.HttpServletResponse;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Locale;

/**
 * What the OpenAI dispatches do beside Knox's: name the user to the front, with its proof, and
 * relay its answer as it comes. A generation streams server-sent events for minutes: each piece
 * read from the front is written and flushed to the client at once (Knox's own copy leaves it in
 * the servlet container's buffer until 32 KiB have gathered), and when the client leaves, the
 * connection to the front is closed at once, so that the front cancels the generation (closing the
 * stream politely would read the rest of the generation first).
 */
final class FrontAnswers {
  /** The header the front counts tokens by (src/tarn/stdlib/openai/server.py USER_HEADER). */
  static final String USER_HEADER = "X-TARN-User";
  private static final int CHUNK = 8192;

  private FrontAnswers() {
  }

  /**
   * Replaces whatever the client sent as X-TARN-User and X-TARN-User-Proof with the authenticated
   * user and its proof (UserProof) from {@code proofs}, the one TarnAuthz left on the request. No
   * user: neither header; no proofs or no token: no proof (the front counts the user anonymous).
   */
  static void nameUser(HttpUriRequest outbound, String user, UserProof proofs) {
    outbound.removeHeaders(USER_HEADER);
    outbound.removeHeaders(UserProof.HEADER);
    if (user != null && !user.isEmpty() && user.chars().noneMatch(Character::isISOControl)) {
      outbound.setHeader(USER_HEADER, user);
      String proof = proofs == null ? null : proofs.of(user);
      if (proof != null) {
        outbound.setHeader(UserProof.HEADER, proof);
      }
    }
  }

  static boolean isEventStream(String contentType) {
    return contentType != null
        && contentType.toLowerCase(Locale.ROOT).trim().startsWith("text/event-stream");
  }

  /**
   * Writes the front's body to the client (status and headers already set), flushing after each
   * piece of an event stream. The connection to the front is released for reuse when the body
   * was read to its end, and closed otherwise (client gone, front broken).
   */
  static void relay(HttpServletResponse response, HttpResponse answer, String contentType) throws IOException {
    HttpEntity entity = answer.getEntity();
    if (entity == null) {
      return;
    }
    if (contentType != null) {
      response.setContentType(contentType);
    }
    boolean events = isEventStream(contentType);
    InputStream body = entity.getContent();
    boolean complete = false;
    try {
      OutputStream client = response.getOutputStream();
      complete = copy(body, client, events);
      client.flush();
    } finally {
      if (complete) {
        body.close();
        close(answer);
      } else {
        close(answer); // the socket first: closing the body would read it to the end
        try {
          body.close();
        } catch (IOException ignored) {
          // the connection is closed already
        }
      }
    }
  }

  /** Copies {@code from} to {@code to}, flushing each piece when {@code flushEach}; true at the end of {@code from}. */
  static boolean copy(InputStream from, OutputStream to, boolean flushEach) throws IOException {
    byte[] buffer = new byte[CHUNK];
    int n;
    while ((n = from.read(buffer)) != -1) {
      to.write(buffer, 0, n);
      if (flushEach) {
        to.flush();
      }
    }
    return true;
  }

  private static void close(HttpResponse answer) throws IOException {
    if (answer instanceof Closeable) {
      ((Closeable) answer).close();
    }
  }
}
