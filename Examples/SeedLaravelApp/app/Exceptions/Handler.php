<?php

namespace App\Exceptions;

use Illuminate\Foundation\Exceptions\Handler as ExceptionHandler;
use Throwable;

class Handler extends ExceptionHandler
{
    // An API: errors answer JSON whatever the request's Accept header (404 for findOrFail, 401
    // for the guard, 500 for a failed transaction), as `php artisan make` apps do for api routes.
    protected function shouldReturnJson($request, Throwable $e)
    {
        return true;
    }
}
