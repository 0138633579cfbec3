package tarn.knox;

import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletRequestWrapper;

/** The request as the servlet container received it, below Knox's wrappers. */
public final class Servlets {
  private Servlets() {
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
