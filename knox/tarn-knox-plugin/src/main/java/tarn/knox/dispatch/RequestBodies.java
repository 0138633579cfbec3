package tarn.knox.dispatch;

import org.apache.http.HttpEntity;
import org.apache.http.entity.AbstractHttpEntity;
import org.apache.http.entity.ByteArrayEntity;
import org.apache.http.entity.ContentType;
import org.apache.http.entity.InputStreamEntity;
import tarn.knox.Servlets;

import javax.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Locale;

/**
 * The request body for Triton: the client's bytes with the client's Content-Length, read from the
 * innermost request, as the client sent it, so that no provider's wrapper changes it (Knox's URL
 * rewrite wrapper, which TRITON's routes no longer use, reported every length as unknown, so bodies
 * went chunked, and re-serialized JSON bodies). Triton gets the client's JSON and the binary tensor
 * extension (Inference-Header-Content-Length + Content-Length) the framing clients send. Form
 * bodies, which the identity assertion may rewrite, keep Knox's behaviour.
 *
 * <p>A body a filter already read (TarnAuthz, for an OpenAI generation's model) is held on the
 * request ({@link Servlets#HELD_BODY}) and sent from there, byte for byte, with its length.
 *
 * <p>Failover: Knox's HA dispatch sends the same entity again to the next instance. A body up to
 * {@link #REPLAY_LIMIT} bytes (system property {@code tarn.knox.replay.limit}, default 8 MiB) is
 * held in memory so that it can be; a larger one is streamed once, and a second send fails at once
 * with an IOException instead of leaving the next instance waiting for a body that never comes.
 */
final class RequestBodies {
  static final long REPLAY_LIMIT = Long.getLong("tarn.knox.replay.limit", 8L << 20);

  private RequestBodies() {
  }

  static HttpEntity entity(HttpServletRequest request) throws IOException {
    String type = request.getContentType();
    ContentType contentType = type == null ? null : ContentType.parse(type);
    Object held = request.getAttribute(Servlets.HELD_BODY);
    if (held instanceof byte[]) {
      return new ByteArrayEntity((byte[]) held, contentType); // a filter read it: the same bytes
    }
    long length = clientLength(request);
    InputStream in = (isForm(request) ? request : Servlets.innermost(request)).getInputStream();
    if (length >= 0 && length <= REPLAY_LIMIT) {
      byte[] body = in.readNBytes((int) length);
      if (body.length != length) {
        throw new IOException("request body ended after " + body.length + " of " + length + " bytes");
      }
      ByteArrayEntity entity = new ByteArrayEntity(body, contentType);
      return entity;
    }
    return new OnceEntity(contentType == null ? new InputStreamEntity(in, length)
        : new InputStreamEntity(in, length, contentType));
  }

  /** A streamed body that refuses to be sent twice. */
  static final class OnceEntity extends AbstractHttpEntity {
    private final InputStreamEntity body;
    private boolean sent;

    OnceEntity(InputStreamEntity body) {
      this.body = body;
      setContentType(body.getContentType());
    }

    @Override
    public boolean isRepeatable() {
      return false;
    }

    @Override
    public long getContentLength() {
      return body.getContentLength();
    }

    @Override
    public InputStream getContent() throws IOException {
      return body.getContent();
    }

    @Override
    public synchronized void writeTo(OutputStream out) throws IOException {
      if (sent) {
        throw new IOException("request body over " + REPLAY_LIMIT + " bytes already sent to a failed instance; not replayed");
      }
      sent = true;
      body.writeTo(out);
    }

    @Override
    public boolean isStreaming() {
      return !sent;
    }
  }

  /** The Content-Length the client sent (innermost request), or -1 (unknown: chunked). */
  static long clientLength(HttpServletRequest request) {
    if (isForm(request)) {
      return -1;
    }
    long length = Servlets.innermost(request).getContentLengthLong();
    return length >= 0 ? length : -1;
  }

  private static boolean isForm(HttpServletRequest request) {
    String type = request.getContentType();
    return type != null && type.toLowerCase(Locale.ROOT).startsWith("application/x-www-form-urlencoded");
  }
}
