package tarn.lab.ranger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.ranger.authorization.hadoop.config.RangerPluginConfig;
import org.apache.ranger.plugin.service.RangerBasePlugin;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The probe's commands, offline: Ranger Admin is unreachable, so init() falls back to the policy
 * and roles cache files a plugin wrote before (tests/integration/test_ranger_java_plugin.py points
 * the probe at the Ranger Admin stand-in).
 */
class PluginProbeTest {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    @Test
    void answersFromThePoliciesAndRolesOfItsCache(@TempDir Path cache) throws IOException {
        JsonNode serviceDef = MAPPER.readTree(new File(System.getProperty("tarn.serviceDef")));
        ObjectNode policies = (ObjectNode) MAPPER.readTree("""
                {"serviceName": "triton_prod", "policyVersion": 7, "policies": [
                  {"id": 3, "name": "add", "isEnabled": true, "isAuditEnabled": true,
                   "resources": {"model": {"values": ["add_*"]}},
                   "policyItems": [{"users": ["alice"], "roles": ["ml-ops"],
                                    "accesses": [{"type": "infer", "isAllowed": true}]}]}]}
                """);
        policies.set("serviceDef", serviceDef);
        Files.writeString(cache.resolve("tarn-unit_triton_prod.json"), policies.toString());
        Files.writeString(cache.resolve("tarn-unit_triton_prod_roles.json"), """
                {"serviceName": "triton_prod", "roleVersion": 4,
                 "rangerRoles": [{"id": 1, "name": "ml-ops", "users": [{"name": "carol", "isAdmin": false}]}]}
                """);

        Properties config = new Properties();
        String prefix = "ranger.plugin." + PluginProbe.SERVICE_TYPE;
        config.setProperty(prefix + ".service.name", "triton_prod");
        config.setProperty(prefix + ".policy.rest.url", "http://127.0.0.1:1"); // refused
        config.setProperty(prefix + ".policy.rest.client.max.retry.attempts", "1");
        config.setProperty(prefix + ".policy.rest.client.retry.interval.ms", "10");
        config.setProperty(prefix + ".policy.pollIntervalMs", "60000");
        config.setProperty(prefix + ".policy.cache.dir", cache.toString());
        RangerBasePlugin plugin = new RangerBasePlugin(
                new RangerPluginConfig(PluginProbe.SERVICE_TYPE, null, "tarn-unit", config));
        plugin.init();
        try {
            PluginProbe probe = new PluginProbe(plugin, MAPPER);
            assertEquals("{\"policy_version\":7,\"role_version\":4,\"userstore_version\":-1}",
                    probe.answer("{\"cmd\": \"versions\"}").toString());
            assertEquals("{\"allowed\":true,\"audited\":true,\"policy_id\":3,\"policy_version\":7}",
                    probe.answer(check("alice", "add_sub")).toString());
            assertEquals("true/3", verdict(probe.answer(check("carol", "add_sub"))), "carol is in ml-ops");
            assertEquals("false/-1", verdict(probe.answer(check("bob", "add_sub"))));
            assertEquals("{\"roles\":{\"ml-ops\":{\"users\":[\"carol\"]}},\"role_version\":4}",
                    probe.answer("{\"cmd\": \"roles\"}").toString());
            assertEquals("{\"enricher\":false}", probe.answer("{\"cmd\": \"user_store\"}").toString());

            JsonNode reached = probe.answer("{\"cmd\": \"wait_version\", \"at_least\": 7, \"timeout_ms\": 10}");
            assertEquals("7/true", reached.get("version") + "/" + reached.get("reached"));
            JsonNode timedOut = probe.answer(
                    "{\"cmd\": \"wait_version\", \"of\": \"roles\", \"at_least\": 5, \"timeout_ms\": 50}");
            assertEquals("4/false", timedOut.get("version") + "/" + timedOut.get("reached"));
            assertTrue(timedOut.get("waited_ms").asLong() >= 50, timedOut.toString());

            assertEquals("IllegalArgumentException: unknown cmd \"grant\"",
                    probe.answer("{\"cmd\": \"grant\"}").get("error").asText());
            assertEquals("IllegalArgumentException: model: expected a string, got null",
                    probe.answer("{\"cmd\": \"check\", \"user\": \"alice\", \"access\": \"infer\"}").get("error").asText());
            assertTrue(probe.answer("{not json").has("error"));
            assertEquals("{\"stopped\":true}", probe.answer("{\"cmd\": \"stop\"}").toString());
        } finally {
            plugin.cleanup();
        }
    }

    private static String check(String user, String model) {
        return "{\"cmd\": \"check\", \"user\": \"%s\", \"groups\": [], \"model\": \"%s\", \"access\": \"infer\"}"
                .formatted(user, model);
    }

    private static String verdict(JsonNode verdict) {
        return verdict.get("allowed").asBoolean() + "/" + verdict.get("policy_id").asLong();
    }
}
