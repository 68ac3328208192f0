// The API client, typed by schema.d.ts (generated from the backend's OpenAPI schema
// by scripts/generate-client.sh; never edited by hand).
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

export const api = createClient<paths>({ baseUrl: "" });

export type Health = components["schemas"]["HealthPublic"];
export type DependencyHealth = components["schemas"]["DependencyHealth"];
