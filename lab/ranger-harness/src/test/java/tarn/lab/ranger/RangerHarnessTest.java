package tarn.lab.ranger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import org.junit.jupiter.api.Test;

class RangerHarnessTest {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private final RangerHarness harness = new RangerHarness(MAPPER);

    /** The repository's one copy of the service def (surefire passes its path). */
    private static String serviceDef() throws IOException {
        return MAPPER.readTree(new File(System.getProperty("tarn.serviceDef"))).toString();
    }

    private static JsonNode document(String policies, String cases) throws IOException {
        return MAPPER.readTree("""
                {"service_def": %s,
                 "service_policies": {"serviceName": "triton", "policyVersion": 1, "policies": %s},
                 "roles": null, "super_users": ["root"], "super_groups": ["admins"],
                 "cases": %s}
                """.formatted(serviceDef(), policies, cases));
    }

    private static final String POLICIES = """
            [{"id": 7, "name": "add", "isEnabled": true, "isAuditEnabled": true,
              "resources": {"model": {"values": ["add_*", "a?d_*", "x*y*z"]}},
              "policyItems": [{"users": ["alice"], "accesses": [{"type": "infer", "isAllowed": true}]}],
              "denyPolicyItems": [{"groups": ["blocked"], "accesses": [{"type": "infer", "isAllowed": true}]}]}]
            """;

    private static String verdict(JsonNode verdict) {
        return verdict.get("allowed").asBoolean() + "/" + verdict.get("audited").asBoolean() + "/"
                + verdict.get("policy_id").asLong();
    }

    @Test
    void evaluatesAllowDenyAndNoDecision() throws IOException {
        JsonNode verdicts = harness.evaluate(document(POLICIES, """
                [{"user": "alice", "groups": [], "model": "ADD_one", "access": "infer"},
                 {"user": "alice", "groups": ["blocked"], "model": "add_one", "access": "infer"},
                 {"user": "bob", "groups": [], "model": "add_one", "access": "infer"},
                 {"user": "alice", "groups": [], "model": "other", "access": "infer"},
                 {"user": "alice", "groups": [], "model": "aXd_one", "access": "infer"},
                 {"user": "alice", "groups": [], "model": "x1y2z", "access": "infer"}]
                """));
        assertEquals("true/true/7", verdict(verdicts.get(0)), "allow item, ignoreCase wildcard");
        assertEquals("false/true/7", verdict(verdicts.get(1)), "deny item");
        assertEquals("false/true/-1", verdict(verdicts.get(2)), "no item matches");
        assertEquals("false/false/-1", verdict(verdicts.get(3)), "no policy matches");
        assertEquals("true/true/7", verdict(verdicts.get(4)), "? wildcard");
        assertEquals("true/true/7", verdict(verdicts.get(5)), "* inside a value");
    }

    @Test
    void superUsersAndGroupsAreAllowedWithoutAPolicy() throws IOException {
        JsonNode verdicts = harness.evaluate(document(POLICIES, """
                [{"user": "root", "groups": [], "model": "other", "access": "list"},
                 {"user": "carol", "groups": ["admins"], "model": "other", "access": "list"}]
                """));
        assertEquals("true/false/-1", verdict(verdicts.get(0)));
        assertEquals("true/false/-1", verdict(verdicts.get(1)));
    }

    @Test
    void anArrayOfDocumentsKeepsEachPolicySetApart() throws IOException {
        String aliceInfers = "[{\"user\": \"alice\", \"groups\": [], \"model\": \"add_one\", \"access\": \"infer\"}]";
        JsonNode input = MAPPER.createArrayNode()
                .add(document(POLICIES, aliceInfers))
                .add(document("[]", aliceInfers));
        JsonNode output = harness.run(input);
        assertEquals(2, output.size());
        assertEquals("true/true/7", verdict(output.get(0).get(0)));
        // no policies at all: denied, and audit-default audits everything
        assertEquals("false/true/-1", verdict(output.get(1).get(0)));
    }

    @Test
    void validitySchedulesUseTheCaseAccessTime() throws IOException {
        String scheduled = POLICIES.replace("\"isAuditEnabled\": true,",
                "\"isAuditEnabled\": true, \"validitySchedules\": [{\"startTime\": \"2030/01/01 00:00:00\","
                        + " \"endTime\": \"2030/12/31 23:59:59\", \"timeZone\": \"UTC\"}],");
        JsonNode verdicts = harness.evaluate(document(scheduled, """
                [{"user": "alice", "groups": [], "model": "add_one", "access": "infer", "access_time": "2030-06-01T00:00:00Z"},
                 {"user": "alice", "groups": [], "model": "add_one", "access": "infer", "access_time": "2031-01-01T00:00:00Z"}]
                """));
        assertEquals("true/true/7", verdict(verdicts.get(0)));
        assertEquals("false/false/-1", verdict(verdicts.get(1)));
    }

    @Test
    void aVerdictDoesNotDependOnTheCasesBeforeIt() throws IOException {
        // One long-lived Ranger engine denies the third (its evaluators have warmed up).
        JsonNode verdicts = harness.evaluate(document(POLICIES, """
                [{"user": "alice", "groups": [], "model": "add_one", "access": "INFER"},
                 {"user": "alice", "groups": ["blocked"], "model": "add_one", "access": "infer"},
                 {"user": "alice", "groups": [], "model": "add_one", "access": "INFER"}]
                """));
        assertEquals(verdict(verdicts.get(0)), verdict(verdicts.get(2)));
        assertEquals("true/true/7", verdict(verdicts.get(2)));
    }

    @Test
    void thousandsOfCasesInOneRun() throws IOException {
        StringBuilder cases = new StringBuilder("[");
        for (int i = 0; i < 5000; i++) {
            cases.append(i == 0 ? "" : ",").append("{\"user\": \"alice\", \"groups\": [], \"model\": \"add_")
                    .append(i).append("\", \"access\": \"infer\"}");
        }
        JsonNode verdicts = harness.evaluate(document(POLICIES, cases.append("]").toString()));
        assertEquals(5000, verdicts.size());
        verdicts.forEach(v -> assertEquals("true/true/7", verdict(v)));
    }

    @Test
    void refusesAMisspeltKey() throws IOException {
        JsonNode bad = document(POLICIES, "[{\"user\": \"alice\", \"group\": [], \"model\": \"m\", \"access\": \"infer\"}]");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> harness.evaluate(bad));
        assertTrue(e.getMessage().contains("'group'"), e.getMessage());
    }
}
