// The overview's API types (generated, in src/api/schema.d.ts), under short names.
import type { components } from "../../api/schema";

type Schemas = components["schemas"];
export type Overview = Schemas["OverviewPublic"];
export type AttentionRun = Schemas["AttentionRunPublic"];
export type FiringAlert = Schemas["FiringAlertPublic"];
export type OverviewTable = Schemas["OverviewTablePublic"];
export type OverviewHour = Schemas["OverviewHourPublic"];
export type OverviewVerdict = Schemas["OverviewVerdictPublic"];
