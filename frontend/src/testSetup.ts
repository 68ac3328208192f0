// Testing Library waits up to 1 s by default for what a test waits on (findBy*, waitFor).
// A component test run beside a busy machine (CI, a chaos session) has missed that by
// a little: a dialog's refusal shown after the deadline. The wait still ends as soon as
// the condition holds; only a test that would fail anyway waits the longer deadline.
import { configure } from "@testing-library/dom";

configure({ asyncUtilTimeout: 5_000 });
