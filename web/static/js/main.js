// Entry point of the cockpit page (loaded by index.html as a module).
import { startApp } from './app.js';

const root = document.getElementById('app');
if (root) startApp(root);
