<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

// The seed's posts: an id and the denormalized count the controller increments.
return new class extends Migration
{
    public function up()
    {
        Schema::create('posts', function (Blueprint $table) {
            $table->id();
            $table->bigInteger('likes_count')->default(0);
        });
    }

    public function down()
    {
        Schema::dropIfExists('posts');
    }
};
