// A real OpenID Provider for the single sign-on tests: panva's oidc-provider (certified
// by the OpenID Foundation), its development login form, three people and one client.
//   node server.mjs PORT REDIRECT_URI CLIENT_SECRET
// Prints "ready ISSUER" once it listens on 127.0.0.1:PORT.
import Provider from "oidc-provider";

const [port, redirectUri, clientSecret] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

// The login form takes the account id as its login, any password; it is the subject too.
const people = {
  vera: { email: "vera@example.com", groups: ["data-viewers"] },
  otto: { email: "otto@example.com", groups: ["data-viewers", "data-operators"] },
  mallory: { email: "mallory@example.com", groups: ["marketing"] },
};

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: "onceover",
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  pkce: { required: () => true },
  scopes: ["openid", "email", "groups"],
  claims: { openid: ["sub"], email: ["email", "email_verified"], groups: ["groups"] },
  // The claims of the scopes asked for go into the ID token, as Okta's and Keycloak's do
  // with their groups claim configured.
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  async findAccount(_ctx, id) {
    const person = people[id];
    if (!person) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: person.email, email_verified: true, groups: person.groups };
      },
    };
  },
});
provider.on("server_error", (_ctx, error) => console.error("server_error", error));
provider.listen(Number(port), "127.0.0.1", () => console.log(`ready ${issuer}`));
