package tarn.knox.dispatch;

import javax.servlet.ServletResponse;
import javax.servlet.ServletResponseWrapper;
import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

/**
 * Triton's answer body, passed to the client as Triton sent it. Knox's dispatch streams every
 * body through its URL rewrite response (content-type lookups, filter resolution and a copy), even
 * for the TRITON service, which rewrites no body (UrlRewriteResponse.streamResponse: about 2 % of
 * the gateway's CPU samples in a JFR profile under wrk). The body is written to the response below
 * Knox's wrappers instead; the status and headers were already set through them, as Knox sets them.
 */
final class ResponseBodies {
  private ResponseBodies() {
  }

  static void write(HttpServletResponse response, InputStream body) throws IOException {
    try (OutputStream out = innermost(response).getOutputStream()) {
      body.transferTo(out);
    }
  }

  /** The response as the servlet container made it, below Knox's wrappers. */
  static ServletResponse innermost(ServletResponse response) {
    ServletResponse inner = response;
    while (inner instanceof ServletResponseWrapper) {
      inner = ((ServletResponseWrapper) inner).getResponse();
    }
    return inner;
  }
}
