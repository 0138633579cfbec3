package tarn.lab.ranger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Instant;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.ranger.authorization.hadoop.config.RangerPluginConfig;
import org.apache.ranger.plugin.model.RangerServiceDef;
import org.apache.ranger.plugin.policyengine.RangerAccessRequestImpl;
import org.apache.ranger.plugin.policyengine.RangerAccessResourceImpl;
import org.apache.ranger.plugin.policyengine.RangerAccessResult;
import org.apache.ranger.plugin.service.RangerBasePlugin;
import org.apache.ranger.plugin.util.RangerRoles;
import org.apache.ranger.plugin.util.ServicePolicies;

/**
 * Ranger's real policy engine behind JSON on stdin and stdout.
 *
 * <p>Input: one document {@code {"service_def", "service_policies", "roles", "super_users",
 * "super_groups", "cases": [{"user", "groups", "model", "access", "access_time"?}]}}, or a JSON
 * array of such documents (many policy sets in one JVM). Output: per document, an array with one
 * {@code {"allowed", "audited", "policy_id"}} per case; for an array input, an array of those.
 * {@code access_time} is an ISO-8601 instant; without it the engine uses the current time.
 *
 * <p>Each case is answered by a freshly built plugin: Ranger's evaluators keep state across
 * requests that changes later answers (RangerOptimizedPolicyEvaluator.hasMatchablePolicyItem
 * compares the access type case-sensitively only once every item evaluator of the policy has
 * been used), so one engine for many cases would make a verdict depend on the cases before it.
 * A fresh engine gives the answer Ranger gives to the first request after a policy download.
 */
public final class RangerHarness {
    static final String SERVICE_TYPE = "triton";
    static final String RESOURCE = "model";

    private static final Set<String> DOCUMENT_KEYS =
            Set.of("service_def", "service_policies", "roles", "super_users", "super_groups", "cases");
    private static final Set<String> CASE_KEYS = Set.of("user", "groups", "model", "access", "access_time");

    private final ObjectMapper mapper;

    public RangerHarness(ObjectMapper mapper) {
        this.mapper = mapper;
    }

    public static void main(String[] args) throws IOException {
        ObjectMapper mapper = new ObjectMapper();
        try {
            JsonNode output = new RangerHarness(mapper).run(mapper.readTree(System.in));
            OutputStream out = System.out;
            mapper.writeValue(out, output);
            out.write('\n');
            out.flush();
        } catch (IllegalArgumentException | IOException e) {
            System.err.println("ranger-harness: " + e.getMessage());
            System.exit(2);
        }
    }

    /** One document, or an array of documents. */
    public JsonNode run(JsonNode input) throws IOException {
        if (input == null || input.isMissingNode()) {
            throw new IllegalArgumentException("stdin: no JSON document");
        }
        if (!input.isArray()) {
            return evaluate(input);
        }
        ArrayNode all = mapper.createArrayNode();
        for (JsonNode document : input) {
            all.add(evaluate(document));
        }
        return all;
    }

    /** The verdicts of one document's cases, each from a new plugin holding only its policies. */
    public ArrayNode evaluate(JsonNode document) throws IOException {
        requireKeys(document, DOCUMENT_KEYS, "document");
        ArrayNode verdicts = mapper.createArrayNode();
        for (JsonNode testCase : field(document, "cases")) {
            RangerBasePlugin plugin = plugin(document);
            verdicts.add(verdict(plugin.isAccessAllowed(request(testCase))));
            plugin.cleanup();
        }
        return verdicts;
    }

    private RangerBasePlugin plugin(JsonNode document) throws IOException {
        ServicePolicies policies = mapper.treeToValue(field(document, "service_policies"), ServicePolicies.class);
        JsonNode serviceDef = document.get("service_def");
        if (serviceDef != null && !serviceDef.isNull()) {
            policies.setServiceDef(mapper.treeToValue(serviceDef, RangerServiceDef.class));
        }
        if (policies.getServiceDef() == null) {
            throw new IllegalArgumentException("service_def: missing (and service_policies has no serviceDef)");
        }
        String serviceName = policies.getServiceName() != null ? policies.getServiceName() : SERVICE_TYPE;

        // Properties, not ranger-triton-*.xml from the classpath. No init(): init() starts the
        // PolicyRefresher that downloads from Ranger Admin; setPolicies() builds the engine alone.
        RangerBasePlugin plugin = new RangerBasePlugin(
                new RangerPluginConfig(SERVICE_TYPE, serviceName, "tarn-conformance", new Properties()));
        plugin.setSuperUsersAndGroups(strings(document.get("super_users")), strings(document.get("super_groups")));
        JsonNode roles = document.get("roles");
        plugin.setRoles(roles == null || roles.isNull() ? null : mapper.treeToValue(roles, RangerRoles.class));
        plugin.setPolicies(policies);
        // setPolicies() logs and swallows a failure to build the engine: never answer without one.
        if (plugin.getCurrentRangerAuthContext() == null) {
            throw new IllegalArgumentException("service_policies: Ranger did not build a policy engine (see its log above)");
        }
        return plugin;
    }

    private RangerAccessRequestImpl request(JsonNode testCase) {
        requireKeys(testCase, CASE_KEYS, "case");
        Map<String, Object> elements = new HashMap<>();
        elements.put(RESOURCE, text(testCase, "model"));
        RangerAccessRequestImpl request = new RangerAccessRequestImpl(
                new RangerAccessResourceImpl(elements),
                text(testCase, "access"),
                text(testCase, "user"),
                new HashSet<>(strings(testCase.get("groups"))),
                null);
        JsonNode accessTime = testCase.get("access_time");
        if (accessTime != null && !accessTime.isNull()) {
            request.setAccessTime(Date.from(Instant.parse(accessTime.asText())));
        }
        return request;
    }

    private ObjectNode verdict(RangerAccessResult result) {
        ObjectNode verdict = mapper.createObjectNode();
        verdict.put("allowed", result != null && result.getIsAllowed());
        verdict.put("audited", result != null && result.getIsAudited());
        verdict.put("policy_id", result != null ? result.getPolicyId() : -1L);
        return verdict;
    }

    private static JsonNode field(JsonNode node, String name) {
        JsonNode value = node.get(name);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException(name + ": missing");
        }
        return value;
    }

    private static String text(JsonNode node, String name) {
        JsonNode value = field(node, name);
        if (!value.isTextual()) {
            throw new IllegalArgumentException(name + ": expected a string, got " + value);
        }
        return value.asText();
    }

    private static Set<String> strings(JsonNode array) {
        Set<String> ret = new LinkedHashSet<>();
        if (array != null && !array.isNull()) {
            if (!array.isArray()) {
                throw new IllegalArgumentException("expected an array of strings, got " + array);
            }
            array.forEach(item -> ret.add(item.asText()));
        }
        return ret;
    }

    /** A misspelt key would silently test something else: refuse it. */
    private static void requireKeys(JsonNode node, Set<String> allowed, String what) {
        if (node == null || !node.isObject()) {
            throw new IllegalArgumentException(what + ": expected an object, got " + node);
        }
        for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!allowed.contains(name)) {
                throw new IllegalArgumentException(what + ": unknown key '" + name + "' (known: " + allowed + ")");
            }
        }
    }
}
