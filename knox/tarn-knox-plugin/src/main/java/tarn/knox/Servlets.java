package tarn.knox;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletRequestWrapper;
import java.io.IOException;
import java.io.InputStream;

/** The request as the servlet container received it, below Knox's wrappers. */
public final class Servlets {
  /**
   * Request attribute holding the body bytes a filter already read from the client (TarnAuthz
   * reads an OpenAI generation's body to find its model); the dispatch sends these bytes.
   */
  public static final String HELD_BODY = "tarn.knox.held.body";

  private Servlets() {
  }

  /**
   * Reads the client's body once (from the innermost request, as sent) and holds it on the
   * request for the dispatch; the held bytes when already read. Null when it is longer than
   * {@code limit} bytes (what was read is then lost: the request must be refused).
   */
  public static byte[] holdBody(HttpServletRequest request, int limit) throws IOException {
    Object held = request.getAttribute(HELD_BODY);
    if (held instanceof byte[]) {
      return (byte[]) held;
    }
    HttpServletRequest client = innermost(request);
    long declared = client.getContentLengthLong();
    if (declared > limit) {
      return null;
    }
    InputStream in = client.getInputStream();
    byte[] body = in == null ? new byte[0] : in.readNBytes(limit + 1);
    if (body.length > limit) {
      return null;
    }
    if (declared >= 0 && body.length != declared) {
      throw new IOException("request body ended after " + body.length + " of " + declared + " bytes");
    }
    request.setAttribute(HELD_BODY, body);
    return body;
  }

  /** The client's request as received: its raw path, Content-Length and body bytes. */
  public static HttpServletRequest innermost(HttpServletRequest request) {
    HttpServletRequest inner = request;
    while (inner instanceof HttpServletRequestWrapper
        && ((HttpServletRequestWrapper) inner).getRequest() instanceof HttpServletRequest) {
      inner = (HttpServletRequest) ((HttpServletRequestWrapper) inner).getRequest();
    }
    return inner;
  }
}
