package tarn.knox;

import javax.servlet.ServletResponse;
import javax.servlet.ServletResponseWrapper;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletRequestWrapper;

/** The request and response as the servlet container made them, below Knox's wrappers. */
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

  /** The container's response: bytes written to it reach the client unfiltered. */
  public static ServletResponse innermost(ServletResponse response) {
    ServletResponse inner = response;
    while (inner instanceof ServletResponseWrapper) {
      inner = ((ServletResponseWrapper) inner).getResponse();
    }
    return inner;
  }
}
