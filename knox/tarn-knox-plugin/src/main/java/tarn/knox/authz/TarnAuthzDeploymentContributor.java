package tarn.knox.authz;

import org.apache.knox.gateway.deploy.DeploymentContext;
import org.apache.knox.gateway.deploy.ProviderDeploymentContributorBase;
import org.apache.knox.gateway.descriptor.FilterParamDescriptor;
import org.apache.knox.gateway.descriptor.ResourceDescriptor;
import org.apache.knox.gateway.topology.Provider;
import org.apache.knox.gateway.topology.Service;

import java.util.ArrayList;
import java.util.List;

/**
 * Knox authorization provider {@code TarnAuthz}: adds {@link TarnAuthorizationFilter} to each
 * resource of the topology's services, with the provider's params (keys lower-cased, as Knox's
 * own providers pass them), the service role and the topology's name.
 *
 * <pre>
 * &lt;provider&gt;
 *   &lt;role&gt;authorization&lt;/role&gt;&lt;name&gt;TarnAuthz&lt;/name&gt;&lt;enabled&gt;true&lt;/enabled&gt;
 *   &lt;param&gt;&lt;name&gt;tarn.authorize.url&lt;/name&gt;&lt;value&gt;http://controller:8088/authorize&lt;/value&gt;&lt;/param&gt;
 *   &lt;param&gt;&lt;name&gt;tarn.token.file&lt;/name&gt;&lt;value&gt;/etc/knox/tarn.token&lt;/value&gt;&lt;/param&gt;
 * &lt;/provider&gt;
 * </pre>
 */
public class TarnAuthzDeploymentContributor extends ProviderDeploymentContributorBase {
  public static final String ROLE = "authorization";
  public static final String NAME = "TarnAuthz";

  @Override
  public String getRole() {
    return ROLE;
  }

  @Override
  public String getName() {
    return NAME;
  }

  @Override
  public void contributeFilter(DeploymentContext context, Provider provider, Service service,
                               ResourceDescriptor resource, List<FilterParamDescriptor> params) {
    List<FilterParamDescriptor> all = params == null ? new ArrayList<>() : new ArrayList<>(params);
    copyAllProviderParams(provider, resource, all);
    all.add(resource.createFilterParam().name(TarnAuthorizationFilter.RESOURCE_ROLE_PARAM).value(resource.role()));
    if (context.getTopology() != null && context.getTopology().getName() != null) {
      all.add(resource.createFilterParam().name(TarnAuthorizationFilter.TOPOLOGY_PARAM)
          .value(context.getTopology().getName()));
    }
    resource.addFilter().name(getName()).role(getRole()).impl(TarnAuthorizationFilter.class).params(all);
  }
}
