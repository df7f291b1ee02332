<?php

// Laravel from Debian's php-laravel-framework package: its autoloader instead of Composer's,
// and this app's classes (App\ → app/) loaded by a small PSR-4 loader.

require_once '/usr/share/php/Illuminate/autoload.php';

spl_autoload_register(function (string $class) {
    if (strncmp($class, 'App\\', 4) === 0) {
        $file = __DIR__ . '/../app/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

$app = new Illuminate\Foundation\Application(dirname(__DIR__));

// Logs, caches and compiled files live outside the source tree (scripts/seed-app: .data/seed-app).
if ($storage = getenv('SEED_APP_STORAGE')) {
    $app->useStoragePath($storage);
}

$app->singleton(Illuminate\Contracts\Http\Kernel::class, App\Http\Kernel::class);
$app->singleton(Illuminate\Contracts\Console\Kernel::class, App\Console\Kernel::class);
$app->singleton(Illuminate\Contracts\Debug\ExceptionHandler::class, App\Exceptions\Handler::class);

return $app;
