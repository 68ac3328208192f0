import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// The backend serves the built files at /; under `npm run dev`, /api goes to
// `onceover up` on its default port.
export default defineConfig({
  plugins: [react()],
  server: { proxy: { "/api": "http://127.0.0.1:8000" } },
});
