import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// Component tests: jsdom, no network (every API call in them is a function passed in).
export default defineConfig({
  plugins: [react()],
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
    restoreMocks: true,
    setupFiles: ["src/testSetup.ts"],
  },
});
