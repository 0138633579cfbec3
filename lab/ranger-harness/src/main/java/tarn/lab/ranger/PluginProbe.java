package tarn.lab.ranger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongSupplier;
import org.apache.ranger.admin.client.RangerAdminClient;
import org.apache.ranger.plugin.contextenricher.RangerUserStoreEnricher;
import org.apache.ranger.plugin.model.RangerRole;
import org.apache.ranger.plugin.policyengine.RangerAccessRequestImpl;
import org.apache.ranger.plugin.policyengine.RangerAccessResourceImpl;
import org.apache.ranger.plugin.policyengine.RangerAccessResult;
import org.apache.ranger.plugin.service.RangerBasePlugin;
import org.apache.ranger.plugin.util.RangerRoles;
import org.apache.ranger.plugin.util.RangerUserStore;
import org.apache.ranger.plugin.util.ServicePolicies;

/**
 * A real Ranger plugin, configured and started as a Ranger plugin is, behind JSON lines on stdin
 * and stdout: what it downloaded from Ranger Admin and what it answers.
 *
 * <p>Usage: {@code java -cp CONF_DIR:ranger-harness.jar tarn.lab.ranger.PluginProbe APP_ID}.
 * {@code new RangerBasePlugin("triton", APP_ID)} reads {@code ranger-triton-security.xml} from the
 * classpath (CONF_DIR), as every Ranger plugin does: {@code ranger.plugin.triton.service.name},
 * {@code .policy.rest.url}, {@code .policy.pollIntervalMs}, {@code .policy.cache.dir},
 * {@code .use.rangerGroups}, ... {@code init()} starts the PolicyRefresher, which downloads roles
 * and policies through RangerAdminRESTClient before it returns, then every poll interval; a
 * policy set whose service def has no user store enricher gets one when the configuration asks
 * for Ranger's groups, and it downloads the user store the same way.
 *
 * <p>Once init() returns, the probe writes {@code {"ready": true, ...versions}} and then answers
 * one line per command line:
 *
 * <ul>
 *   <li>{@code {"cmd": "versions"}}: {@code {"policy_version", "role_version", "userstore_version"}}
 *       the plugin holds (-1: none);
 *   <li>{@code {"cmd": "wait_version", "of": "policies"|"roles"|"userstore", "at_least": N,
 *       "timeout_ms": T}}: waits until the plugin holds version N or more: {@code {"version",
 *       "reached", "waited_ms"}};
 *   <li>{@code {"cmd": "check", "user", "groups": [...], "model", "access"}}: the plugin's verdict,
 *       {@code {"allowed", "audited", "policy_id", "policy_version"}};
 *   <li>{@code {"cmd": "roles"}}: the roles the plugin holds, {@code {"role_version", "roles":
 *       {name: {"users", "groups", "roles"}}}};
 *   <li>{@code {"cmd": "user_store"}}: the user store enricher's, {@code {"enricher", "version",
 *       "user_groups"}};
 *   <li>{@code {"cmd": "admin", "call": "policies"|"roles"|"user_store", "last_known": N}}: one call
 *       of a new RangerAdminRESTClient made as the plugin makes its own ({@code
 *       RangerBasePlugin.createAdminClient}): {@code {"updated": false}} when it returned null (304),
 *       else {@code {"updated": true, "version", ...}};
 *   <li>{@code {"cmd": "stop"}}: {@code {"stopped": true}}, and the probe exits.
 * </ul>
 *
 * A command the probe does not know, or one missing a field, is answered {@code {"error": ...}}.
 * Ranger logs (warnings and errors) go to stderr.
 */
public final class PluginProbe {
    static final String SERVICE_TYPE = "triton";

    private final RangerBasePlugin plugin;
    private final ObjectMapper mapper;

    public PluginProbe(RangerBasePlugin plugin, ObjectMapper mapper) {
        this.plugin = plugin;
        this.mapper = mapper;
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: java -cp CONF_DIR:ranger-harness.jar tarn.lab.ranger.PluginProbe APP_ID");
            System.exit(2);
        }
        RangerBasePlugin plugin = new RangerBasePlugin(SERVICE_TYPE, args[0]);
        String restUrl = plugin.getConfig().get(prefix(plugin) + ".policy.rest.url");
        if (plugin.getServiceName() == null || restUrl == null) {
            System.err.println("plugin-probe: ranger-" + SERVICE_TYPE + "-security.xml on the classpath must set "
                    + prefix(plugin) + ".service.name and .policy.rest.url");
            System.exit(2);
        }
        plugin.init();

        ObjectMapper mapper = new ObjectMapper();
        PluginProbe probe = new PluginProbe(plugin, mapper);
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        ObjectNode ready = probe.versions().put("ready", true);
        ready.put("service_name", plugin.getServiceName()).put("rest_url", restUrl);
        out.println(mapper.writeValueAsString(ready));

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode answer = probe.answer(line);
            out.println(mapper.writeValueAsString(answer));
            if (answer.path("stopped").asBoolean(false)) {
                break;
            }
        }
        plugin.cleanup();
    }

    /** One command line's answer; a bad command is an {"error"} answer, never an exception. */
    public ObjectNode answer(String line) {
        try {
            JsonNode command = mapper.readTree(line);
            return switch (text(command, "cmd")) {
                case "versions" -> versions();
                case "wait_version" -> waitVersion(command);
                case "check" -> check(command);
                case "roles" -> roles();
                case "user_store" -> userStore();
                case "admin" -> admin(command);
                case "stop" -> mapper.createObjectNode().put("stopped", true);
                default -> throw new IllegalArgumentException("unknown cmd " + command.get("cmd"));
            };
        } catch (Exception e) {
            return mapper.createObjectNode().put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    ObjectNode versions() {
        return mapper.createObjectNode()
                .put("policy_version", plugin.getPoliciesVersion())
                .put("role_version", plugin.getRolesVersion())
                .put("userstore_version", plugin.getUserStoreVersion());
    }

    private ObjectNode waitVersion(JsonNode command) throws InterruptedException {
        String of = command.path("of").asText("policies");
        LongSupplier version = switch (of) {
            case "policies" -> plugin::getPoliciesVersion;
            case "roles" -> plugin::getRolesVersion;
            case "userstore" -> plugin::getUserStoreVersion;
            default -> throw new IllegalArgumentException("of: policies, roles or userstore, not " + of);
        };
        long atLeast = number(command, "at_least");
        long timeoutMs = number(command, "timeout_ms");
        long start = System.nanoTime();
        long current = version.getAsLong();
        while (current < atLeast && (System.nanoTime() - start) / 1_000_000 < timeoutMs) {
            Thread.sleep(5);
            current = version.getAsLong();
        }
        return mapper.createObjectNode()
                .put("version", current)
                .put("reached", current >= atLeast)
                .put("waited_ms", (System.nanoTime() - start) / 1_000_000);
    }

    private ObjectNode check(JsonNode command) {
        Map<String, Object> elements = new HashMap<>();
        elements.put(RangerHarness.RESOURCE, text(command, "model"));
        Set<String> groups = new TreeSet<>();
        command.path("groups").forEach(group -> groups.add(group.asText()));
        RangerAccessRequestImpl request = new RangerAccessRequestImpl(
                new RangerAccessResourceImpl(elements), text(command, "access"), text(command, "user"), groups, null);
        RangerAccessResult result = plugin.isAccessAllowed(request);
        return mapper.createObjectNode()
                .put("allowed", result != null && result.getIsAllowed())
                .put("audited", result != null && result.getIsAudited())
                .put("policy_id", result != null ? result.getPolicyId() : -1L)
                .put("policy_version", plugin.getPoliciesVersion());
    }

    private ObjectNode roles() {
        return rolesNode(plugin.getRoles()).put("role_version", plugin.getRolesVersion());
    }

    private ObjectNode rolesNode(RangerRoles roles) {
        ObjectNode byName = mapper.createObjectNode();
        if (roles != null && roles.getRangerRoles() != null) {
            for (RangerRole role : roles.getRangerRoles()) {
                ObjectNode members = byName.putObject(role.getName());
                role.getUsers().forEach(m -> members.withArray("users").add(m.getName()));
                role.getGroups().forEach(m -> members.withArray("groups").add(m.getName()));
                role.getRoles().forEach(m -> members.withArray("roles").add(m.getName()));
            }
        }
        ObjectNode ret = mapper.createObjectNode();
        ret.set("roles", byName);
        return ret;
    }

    private ObjectNode userStore() {
        RangerUserStoreEnricher enricher = plugin.getUserStoreEnricher();
        ObjectNode ret = mapper.createObjectNode().put("enricher", enricher != null);
        if (enricher != null) {
            ret.setAll(userStoreNode(enricher.getRangerUserStore()));
        }
        return ret;
    }

    private ObjectNode userStoreNode(RangerUserStore store) {
        ObjectNode ret = mapper.createObjectNode();
        if (store != null) {
            ret.put("version", store.getUserStoreVersion());
            Map<String, Set<String>> groups = store.getUserGroupMapping() == null ? Map.of() : store.getUserGroupMapping();
            ret.set("user_groups", mapper.valueToTree(new TreeMap<>(groups)));
            ret.set("users", mapper.valueToTree(new TreeSet<>(store.getUserAttrMapping() == null
                    ? Set.of() : store.getUserAttrMapping().keySet())));
        }
        return ret;
    }

    /** One call of a fresh RangerAdminRESTClient, made from the plugin's own configuration. */
    private ObjectNode admin(JsonNode command) throws Exception {
        RangerAdminClient client = RangerBasePlugin.createAdminClient(plugin.getConfig());
        long lastKnown = number(command, "last_known");
        String call = text(command, "call");
        ObjectNode ret = mapper.createObjectNode().put("client", client.getClass().getName());
        switch (call) {
            case "policies" -> {
                ServicePolicies policies = client.getServicePoliciesIfUpdated(lastKnown, 0L);
                ret.put("updated", policies != null);
                if (policies != null) {
                    ret.put("version", policies.getPolicyVersion()).put("service_name", policies.getServiceName());
                    if (policies.getPolicies() != null) {
                        policies.getPolicies().forEach(p -> ret.withArray("policies").add(p.getName()));
                    }
                }
            }
            case "roles" -> {
                RangerRoles roles = client.getRolesIfUpdated(lastKnown, 0L);
                ret.put("updated", roles != null);
                if (roles != null) {
                    ret.setAll(rolesNode(roles));
                    ret.put("version", roles.getRoleVersion());
                }
            }
            case "user_store" -> {
                RangerUserStore store = client.getUserStoreIfUpdated(lastKnown, 0L);
                ret.put("updated", store != null);
                ret.setAll(userStoreNode(store));
            }
            default -> throw new IllegalArgumentException("call: policies, roles or user_store, not " + call);
        }
        return ret;
    }

    private static String prefix(RangerBasePlugin plugin) {
        return plugin.getConfig().getPropertyPrefix();
    }

    private static String text(JsonNode node, String name) {
        JsonNode value = node.get(name);
        if (value == null || !value.isTextual()) {
            throw new IllegalArgumentException(name + ": expected a string, got " + value);
        }
        return value.asText();
    }

    private static long number(JsonNode node, String name) {
        JsonNode value = node.get(name);
        if (value == null || !value.canConvertToLong()) {
            throw new IllegalArgumentException(name + ": expected an integer, got " + value);
        }
        return value.asLong();
    }
}
