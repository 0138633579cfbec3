package tarn.knox;

import org.apache.knox.gateway.security.SubjectUtils;

import javax.security.auth.Subject;

/** The user Knox authenticated for the current request. */
public final class Users {
  private Users() {
  }

  /**
   * The effective principal's name (the identity assertion's short name: alice, not
   * alice@REALM), as TarnAuthz asks /authorize about it and the OpenAI dispatch names it in
   * X-TARN-User; null when there is no authenticated subject.
   */
  public static String current() {
    Subject subject = SubjectUtils.getCurrentSubject();
    String user = subject == null ? null : SubjectUtils.getEffectivePrincipalName(subject);
    return user == null || user.isEmpty() ? null : user;
  }
}
